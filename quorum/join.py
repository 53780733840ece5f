"""`zkraft quorum start --join HOST:PORT`: a node with no peer list asks a member of the cluster who is in it.

The answer (the Hello RPC) names the cluster, the peer list it started with (whose digest every node puts on
its batches) and the members of the configuration it uses now with their addresses. The new node starts with
no configuration of its own: it is not a member until an operator adds it (`zkraft quorum add`), then the
leader sends it a snapshot and the log, whose configuration entries name every member (quorum.address_book).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from quorum import errors
from quorum.settings import NodeSettings
from quorum.transport import GRPC_OPTIONS
from runtime import grpc_channels
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

JOIN_TIMEOUT_S = 5.0
JOIN_ATTEMPTS_MAX = 6  # a busy member may miss one deadline
JOIN_RETRY_DELAY_S = 0.5


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    digest: str  # the cluster's peers digest (quorum.transport.peers_digest)
    peers: str  # the peer list the cluster started with, "1=h:p,..."
    members: str  # the members now, "1=h:p,..."


async def ask_to_join(settings: NodeSettings) -> JoinAnswer | None:
    """The cluster's answer at `settings.join`, asked for JOIN_ATTEMPTS_MAX times at most; None when nobody
    answered (a restart does not need one: its data dir knows the cluster)."""
    reply = None
    async with grpc_channels.aio_channel(settings.join, settings.peer_tls, GRPC_OPTIONS) as channel:
        for _ in range(JOIN_ATTEMPTS_MAX):
            try:
                reply = await pb_grpc.RaftPeerStub(channel).Hello(
                    pb.HelloRequest(cluster_id=settings.cluster_id, **{"from": settings.node_id}),
                    timeout=JOIN_TIMEOUT_S,
                )
                break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(JOIN_RETRY_DELAY_S)
    if reply is None:
        return None
    if reply.cluster_id != settings.cluster_id:
        raise errors.StartupError(
            f"cannot join: {settings.join} belongs to cluster '{reply.cluster_id}', not '{settings.cluster_id}'"
        )
    if settings.node_id in _ids(reply.peers):
        raise errors.StartupError(
            f"cannot join as node {settings.node_id}: the cluster started with that id ({reply.peers}); "
            "a new node takes an id never used in this cluster"
        )
    return JoinAnswer(reply.peers_digest, reply.peers, reply.members)


def _ids(text: str) -> set[int]:
    return {int(item.partition("=")[0]) for item in filter(None, text.split(","))}
