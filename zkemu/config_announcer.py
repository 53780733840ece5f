"""Each member puts its own ZooKeeper client address into /zookeeper/config.

ZooKeeper reads every server's client address from its configuration file (`server.N=...;clientPort`).
A zkraft node knows only its peers' peer addresses, so each node announces its own client address
(clientPortAddress, or its peer host when that is a wildcard, and clientPort) with a MemberClientTxn once
it serves and its line in /zookeeper/config does not show it (zkemu.tree applies it on every node alike).
The first announcement of a new cluster also carries the text of the configuration it started with,
which fills /zookeeper/config before any configuration entry. A single-node quorum announces nothing: a
standalone ZooKeeper has no dynamic configuration either. A learner has no line until it is promoted; its
next check after that announces it.
"""

from __future__ import annotations

import asyncio

import structlog

from quorum.facade import NodeSettings, QuorumFacade
from zkemu.config_text import ConfigTextError, configuration_text, parse_config
from zkemu.paths import CONFIG_PATH
from zkemu.tree import ZnodeTree
from zkemu.write_router import ConnectionLossError, WriteRouter
from zkraft_proto import zk_pb2

__all__ = ["ANNOUNCE_INTERVAL_S", "ClientAddressAnnouncer", "client_address"]

ANNOUNCE_INTERVAL_S = 0.5  # between two looks at /zookeeper/config (one local read each)
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def client_address(settings: NodeSettings, peer_address: str) -> str:
    """host:port where ZooKeeper clients reach this node ("" without a plaintext client port)."""
    if not settings.client_port:
        return ""
    host = settings.client_port_address
    if host in _WILDCARDS:
        host = peer_address.rpartition(":")[0]
    return f"{host}:{settings.client_port}"


class ClientAddressAnnouncer:
    def __init__(self, quorum: QuorumFacade, tree: ZnodeTree, router: WriteRouter, settings: NodeSettings) -> None:
        self._quorum = quorum
        self._tree = tree
        self._router = router
        self._settings = settings
        self._timeout_s = settings.proposal_timeout_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("zk.config").bind(node=settings.node_id)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="zk-config-announcer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_INTERVAL_S)
            try:
                txn = self.wanted()
                if txn is not None:
                    await self._announce(txn)
            except Exception as exc:  # loop boundary: the next look tries again
                self.log.warning("client_address_announce_failed", error=repr(exc))

    def wanted(self) -> zk_pb2.MemberClientTxn | None:
        """The announcement /zookeeper/config needs from this node now, or None."""
        q = self._quorum
        if not q.serving:
            return None
        config = q.configuration()
        if q.node_id not in config.voters + config.observers or len(config.voters + config.observers) < 2:
            return None
        mine = client_address(self._settings, q.address_of(q.node_id))
        data = self._tree.get_data(CONFIG_PATH)[0]
        if not data:
            if config.version != 0:
                return None  # a configuration entry is on its way: it fills the text
            base = configuration_text(config, {})
            return zk_pb2.MemberClientTxn(server_id=q.node_id, client_address=mine, base_config=base)
        try:
            shown = parse_config(data.decode()).by_id().get(q.node_id)
        except (ConfigTextError, UnicodeDecodeError):
            return None
        if shown is None or shown.client == mine:
            return None
        return zk_pb2.MemberClientTxn(server_id=q.node_id, client_address=mine)

    async def _announce(self, announcement: zk_pb2.MemberClientTxn) -> None:
        try:
            zxid, result = await self._router.submit(zk_pb2.Txn(member_client=announcement), self._timeout_s)
        except ConnectionLossError as exc:
            self.log.info("client_address_not_announced", error=str(exc))
            return
        self.log.info("client_address_announced", client_address=announcement.client_address, zxid=zxid, err=result.err)


async def announce(router: WriteRouter, server_id: int, client: str, timeout_s: float) -> None:
    """A reconfig's `server.N=...;client`: the client address it names, into /zookeeper/config."""
    txn = zk_pb2.Txn(member_client=zk_pb2.MemberClientTxn(server_id=server_id, client_address=client))
    await router.submit(txn, timeout_s)
