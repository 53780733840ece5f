"""The group coordinator (Kafka's `kafka.coordinator.group`, docs/research/kafka.md §5).

* `partitioner`: which `__consumer_offsets` partition (and so which broker) owns a group.
* `records`: the key/value binary formats of `__consumer_offsets`.
* `metadata`: a group and its members, the state table, protocol selection (pure).
* `coordinator`: JoinGroup/SyncGroup/Heartbeat/LeaveGroup/offsets, delayed joins,
  session expiry, loading and unloading the partitions this broker leads.
* `api`: the gRPC edge (protobuf in, protobuf out) and `__consumer_offsets` creation.
"""
