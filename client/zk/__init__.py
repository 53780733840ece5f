"""The ZooKeeper client: `ZkClient` (blocking) and `AsyncZkClient`, kazoo's API on zkraft's session stream.

`zkraft_proto.zk_pb2` is read and written only in `client.zk.codec`. Users
import the public names from `client` (`from client import ZkClient`).
"""
