"""The leader's sweep of container and TTL znodes (ZooKeeper's ContainerManager, research §1.3).

Only the leader runs it (LeaderZooKeeperServer starts ContainerManager when it
leads): every `znode.container.checkIntervalMs` it reads the candidates from
the tree's containers index (ZnodeTree.sweep_candidates) and proposes one
DeleteContainerTxn each through the write router, spaced so that no more than
`znode.container.maxPerMinute` go a minute (checkContainers' minIntervalMs).
The leader's clock only picks candidates: whether a node goes is decided when
the entry is applied, with the entry's own time (Txn.time_ms) and the state
at its zxid, so every replica agrees, and a node that gained a child or was
modified in the meantime stays (zkemu.tree._delete_container).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from quorum.facade import NodeSettings, QuorumFacade
from zkemu.errors import Code
from zkemu.tree import ZnodeTree
from zkemu.write_router import ConnectionLossError, WriteRouter
from zkraft_proto import zk_pb2

__all__ = ["ContainerManager", "delete_spacing_s"]

_MS_PER_MINUTE = 60_000


def delete_spacing_s(max_per_minute: int) -> float:
    """The least time between two deletes so that at most `max_per_minute` go a minute."""
    return _MS_PER_MINUTE / max_per_minute / 1000


class ContainerManager:
    def __init__(
        self,
        quorum: QuorumFacade,
        tree: ZnodeTree,
        router: WriteRouter,
        settings: NodeSettings,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self._quorum = quorum
        self._tree = tree
        self._router = router
        self._check_interval_s = settings.container_check_interval_ms / 1000
        self._max_per_minute = settings.container_max_per_minute
        self._never_used_ms = settings.container_max_never_used_interval_ms
        self._proposal_timeout_s = settings.proposal_timeout_ms / 1000
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("zk.containers").bind(node=settings.node_id)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="zk-container-manager")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _leading(self) -> bool:
        return self._quorum.is_leader

    async def _run(self) -> None:
        """A check every interval while this node leads (the timer of ContainerManager.start)."""
        while True:
            await asyncio.sleep(self._check_interval_s)
            if not self._leading():
                continue
            try:
                await self.check()
            except Exception as exc:  # loop boundary: the next interval tries again
                self.log.warning("container_check_failed", error=repr(exc))

    async def check(self) -> int:
        """One pass (ContainerManager.checkContainers): propose a delete for each candidate while this node
        leads, spaced by maxPerMinute; returns how many were deleted."""
        candidates = self._tree.sweep_candidates(self._now_ms(), self._never_used_ms, self._max_per_minute)
        spacing_s = delete_spacing_s(self._max_per_minute)
        deleted = 0
        for path in candidates:
            if not self._leading():
                self.log.info("container_check_stopped", reason="not_leader", left=len(candidates) - deleted)
                break
            started = time.monotonic()
            deleted += await self._delete(path)
            wait_s = spacing_s - (time.monotonic() - started)
            if wait_s > 0:
                await asyncio.sleep(wait_s)
        return deleted

    async def _delete(self, path: str) -> int:
        txn = zk_pb2.Txn(delete_container=zk_pb2.DeleteContainerTxn(path=path, never_used_ms=self._never_used_ms))
        try:
            zxid, result = await self._router.submit(txn, self._proposal_timeout_s)
        except ConnectionLossError as exc:
            self.log.warning("container_delete_not_committed", path=path, error=str(exc))
            return 0
        # A node that gained a child or was modified since it was picked stays: not an error.
        self.log.info("container_delete_applied", path=path, zxid=zxid, err=Code(result.err).name)
        return int(result.err == Code.OK)
