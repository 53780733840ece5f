"""The Kafka client: `Producer`, `Consumer`, `Admin`, the record-batch format and Kafka's error codes.

Users import the public names from `client` (`from client import Producer`).
Nothing is imported here, so that a process needing one module (the Spark
source's runner needs the wire client alone) does not pay for the others.
"""
