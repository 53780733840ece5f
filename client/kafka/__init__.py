"""The Kafka client: `Producer`, `Consumer`, `Admin`, the record-batch format and Kafka's error codes.

Users import the public names from `client` (`from client import Producer`).
`zkraft_proto.broker_pb2` is built and read only in `client.kafka.codec`.
Nothing is imported here, so that a process needing one module (the Spark
source's runner needs the wire client alone) does not pay for the others.
"""
