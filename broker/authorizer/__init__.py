"""Kafka's ZooKeeper-era AclAuthorizer: the pure decision (decision.py), ACLs in ZooKeeper and their change
notifications (zk_store.py), the broker's authorizer that keeps them in memory (authorizer.py) and the checks
both front ends make with it (checks.py)."""

ACL_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
# Kafka 2.8 still accepts its deprecated predecessor's name for the same authorizer.
AUTHORIZER_CLASSES = frozenset({ACL_AUTHORIZER_CLASS, "kafka.security.auth.SimpleAclAuthorizer"})
