"""The client-visible Stat of a znode (jute `class Stat`, research §1.2), and its protobuf form."""

from __future__ import annotations

from dataclasses import dataclass

from zkraft_proto import zk_pb2


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: quorum/raft/types.py says why
class Stat:
    """The 11 fields in ZooKeeper's wire order.

    `cversion` is the value clients see (`2 * stored - num_children`, DataNode.copyStat),
    `data_length` and `num_children` are computed when the stat is read.
    """

    czxid: int = 0
    mzxid: int = 0
    ctime: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    aversion: int = 0
    ephemeral_owner: int = 0
    data_length: int = 0
    num_children: int = 0
    pzxid: int = 0

    def to_pb(self) -> zk_pb2.Stat:
        return zk_pb2.Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            aversion=self.aversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=self.data_length,
            num_children=self.num_children,
            pzxid=self.pzxid,
        )

    @classmethod
    def from_pb(cls, pb: zk_pb2.Stat) -> Stat:
        return cls(
            czxid=pb.czxid,
            mzxid=pb.mzxid,
            ctime=pb.ctime,
            mtime=pb.mtime,
            version=pb.version,
            cversion=pb.cversion,
            aversion=pb.aversion,
            ephemeral_owner=pb.ephemeral_owner,
            data_length=pb.data_length,
            num_children=pb.num_children,
            pzxid=pb.pzxid,
        )
