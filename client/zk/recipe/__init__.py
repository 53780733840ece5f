"""Higher-level ZooKeeper recipes built on the client's public API only (kazoo's `kazoo.recipe`)."""

from client.zk.recipe.watchers import ChildrenWatch, DataWatch

__all__ = ["ChildrenWatch", "DataWatch"]
