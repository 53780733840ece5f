"""ZooKeeper semantics as the replicated state machine: znode tree, sessions, watches, ACLs, the session service."""
