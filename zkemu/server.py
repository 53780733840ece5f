"""`zkraft quorum start` with the ZooKeeper state machine: the znode tree plus the session service."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from quorum.facade import NodeSettings, StartupError, configure_logging, run_hosted
from runtime import event_loop
from zkemu.metrics import start_node_ops
from zkemu.service import ZooKeeperService
from zkemu.tree import AppliedTxn, ZnodeTree


def build(settings: NodeSettings) -> tuple[ZnodeTree, ZooKeeperService]:
    service: ZooKeeperService | None = None

    def on_applied(applied: AppliedTxn) -> None:
        if service is not None:
            service.on_applied(applied)

    log = structlog.get_logger("quorum").bind(node=settings.node_id)
    tree = ZnodeTree(Path(settings.data_dir) / "zk", on_applied=on_applied, log=log)
    service = ZooKeeperService(settings, tree)
    return tree, service


async def run(settings: NodeSettings, stop: asyncio.Event | None = None) -> int:
    tree, service = build(settings)
    try:
        ops_servers = start_node_ops(settings, service)
    except OSError as exc:
        tree.close()
        raise StartupError(f"cannot serve metrics or the AdminServer: {exc}") from None
    try:
        return await run_hosted(settings, tree, service, stop)
    finally:
        for ops in ops_servers:
            ops.stop()


def serve(settings: NodeSettings) -> int:
    configure_logging()
    return event_loop.run(run(settings))
