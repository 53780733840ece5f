"""zkraft: ZooKeeper-era Kafka on our own Raft quorum, feeding Spark Structured Streaming.

This package is the command-line front (`zkraft`, `python3 -m zkraft`) and the
local-cluster launcher (`zkraft up`); the parts live in `quorum`, `zkemu`,
`client`, `broker` and `spark_connector`.
"""
