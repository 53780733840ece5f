"""gRPC servicers of a quorum node: Raft peer traffic and the client-facing Quorum service.

One function, `abort_with`, maps quorum errors to gRPC status codes; the
`error-code`, `leader-id` and `leader-address` trailing metadata let a client
rebuild the typed error and follow the leader.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import grpc

from quorum import errors
from quorum.codec import message_from_pb, message_to_pb
from quorum.node import QuorumNode
from quorum.raft.membership import ChangeKind
from quorum.raft.types import Message, MessageType
from quorum.state_check import StateMachineDamagedError
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

_STATUS_OF: dict[type[errors.QuorumError], grpc.StatusCode] = {
    errors.NotLeaderError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ProposalDroppedError: grpc.StatusCode.UNAVAILABLE,
    errors.ProposalLostError: grpc.StatusCode.ABORTED,
    errors.QuorumTimeoutError: grpc.StatusCode.DEADLINE_EXCEEDED,
    errors.ShuttingDownError: grpc.StatusCode.UNAVAILABLE,
    errors.ClusterMismatchError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.StateUnavailableError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.MembershipChangeError: grpc.StatusCode.FAILED_PRECONDITION,
}

DEFAULT_READ_TIMEOUT_S = 5.0
# Changes of role or leader a proposal that found no leader waits through before it is answered.
LEADERSHIP_CHANGES_MAX = 16


async def abort_with(context: grpc.aio.ServicerContext, exc: errors.QuorumError) -> NoReturn:
    metadata: list[tuple[str, str]] = [("error-code", exc.code)]
    if isinstance(exc, errors.NotLeaderError):
        metadata += [("leader-id", str(exc.leader_id)), ("leader-address", exc.leader_address)]
    context.set_trailing_metadata(tuple(metadata))
    await context.abort(_STATUS_OF.get(type(exc), grpc.StatusCode.INTERNAL), str(exc))
    raise AssertionError("unreachable")  # context.abort raises


class RaftPeerService(pb_grpc.RaftPeerServicer):
    def __init__(self, node: QuorumNode) -> None:
        self._node = node

    async def _refuse_mismatch(self, context: Any, cluster_id: str, digest: str) -> None:
        n = self._node
        if cluster_id != n.cluster_id:
            msg = f"node {n.node_id} belongs to cluster '{n.cluster_id}', not '{cluster_id}'"
        elif digest != n.digest:
            msg = f"node {n.node_id} has a different peer list: {n.bootstrap_peers}"
        else:
            return
        n.log.error("peer_config_mismatch", reason=msg)
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, msg)

    async def Stream(self, request_iterator: AsyncIterator[pb.RaftBatch], context: Any) -> pb.StreamAck:  # noqa: N802
        checked = False
        async for batch in request_iterator:
            if not checked:
                await self._refuse_mismatch(context, batch.cluster_id, batch.peers_digest)
                checked = True
            self._node.deliver([message_from_pb(m) for m in batch.messages])
        return pb.StreamAck()

    async def InstallSnapshot(  # noqa: N802
        self, request_iterator: AsyncIterator[pb.SnapshotChunk], context: Any
    ) -> pb.SnapshotAck:
        writer = None
        header = None
        try:
            async for chunk in request_iterator:
                if header is None:
                    if chunk.cluster_id != self._node.cluster_id:
                        return pb.SnapshotAck(ok=False, error=f"wrong cluster id '{chunk.cluster_id}'")
                    header = message_from_pb(chunk.message)
                    if header.type is not MessageType.SNAPSHOT or header.snapshot is None:
                        return pb.SnapshotAck(ok=False, error="first chunk carries no snapshot header")
                    writer = self._node.snapshot_store().create(header.snapshot)
                assert writer is not None
                if chunk.data:
                    writer.write(chunk.data)
                if chunk.last:
                    writer.commit()
                    writer = None
                    self._node.deliver([header])
                    return pb.SnapshotAck(ok=True)
            return pb.SnapshotAck(ok=False, error="stream ended before the last chunk")
        finally:
            if writer is not None:
                writer.abort()

    async def FetchState(  # noqa: N802
        self, request: pb.FetchStateRequest, context: Any
    ) -> AsyncIterator[pb.SnapshotChunk]:
        """This node's applied state for a peer rebuilding its state machine (quorum.state_fetch)."""
        await self._refuse_mismatch(context, request.cluster_id, request.peers_digest)
        node = self._node
        try:
            meta, chunks = node.state_for_peer(request.min_index)
        except errors.QuorumError as exc:
            await abort_with(context, exc)
        header = message_to_pb(Message(MessageType.SNAPSHOT, getattr(request, "from"), node.node_id, 0, snapshot=meta))
        first = True
        try:
            for data in chunks:
                yield pb.SnapshotChunk(cluster_id=node.cluster_id, message=header if first else None, data=data)
                first = False
        except StateMachineDamagedError as exc:  # marked: this node's next start rebuilds it
            node.log.error("state_send_failed", peer=getattr(request, "from"), index=meta.index, error=str(exc))
            await context.abort(grpc.StatusCode.INTERNAL, str(exc))
        yield pb.SnapshotChunk(cluster_id=node.cluster_id, message=header if first else None, last=True)
        node.log.info("state_sent_to_peer", peer=getattr(request, "from"), index=meta.index, term=meta.term)

    async def Hello(self, request: pb.HelloRequest, context: Any) -> pb.HelloResponse:  # noqa: N802
        n = self._node
        status = n.status()
        return pb.HelloResponse(
            cluster_id=n.cluster_id,
            peers_digest=n.digest,
            node_id=n.node_id,
            peers=n.bootstrap_peers,
            members=status.members,
        )


class QuorumService(pb_grpc.QuorumServicer):
    def __init__(self, node: QuorumNode) -> None:
        self._node = node

    async def Propose(self, request: pb.ProposeRequest, context: Any) -> pb.ProposeResponse:  # noqa: N802
        timeout_s = self._node.settings.proposal_timeout_ms / 1000
        remaining = context.time_remaining()
        if remaining is not None:
            timeout_s = min(timeout_s, max(remaining, 0.0))
        try:
            results = await self._propose(list(request.commands), timeout_s)
        except errors.QuorumError as exc:
            await abort_with(context, exc)
        return pb.ProposeResponse(results=[pb.ProposeResult(index=i, value=v) for i, v in results])

    async def _propose(self, commands: list[bytes], timeout_s: float) -> list[tuple[int, bytes]]:
        """Propose `commands`; while no leader is known (an election is under way) wait for the election
        to be decided, up to two election timeouts (a split vote, then a second election) within
        `timeout_s`: then this node leads and proposes, or the NotLeaderError names the new leader. The
        client does not have to poll the servers meanwhile."""
        node = self._node
        now_s = time.monotonic()
        deadline_s = now_s + timeout_s
        election_s = node.settings.election_timeout_ticks * node.settings.tick_ms / 1000
        leader_wait_end_s = min(deadline_s, now_s + 2 * election_s)
        for _ in range(LEADERSHIP_CHANGES_MAX):
            try:
                return await node.propose_many(commands, max(deadline_s - time.monotonic(), 0.0))
            except errors.NotLeaderError as exc:
                wait_s = leader_wait_end_s - time.monotonic()
                if exc.leader_id or wait_s <= 0:
                    raise
                await node.leadership_changed(wait_s)
        return await node.propose_many(commands, max(deadline_s - time.monotonic(), 0.0))

    async def Read(self, request: pb.ReadRequest, context: Any) -> pb.ReadResponse:  # noqa: N802
        remaining = context.time_remaining()
        timeout_s = DEFAULT_READ_TIMEOUT_S if remaining is None else max(remaining, 0.0)
        try:
            value, applied = await self._node.read(request.key, request.linearizable, timeout_s)
        except errors.QuorumError as exc:
            await abort_with(context, exc)
        return pb.ReadResponse(found=value is not None, value=value or b"", applied_index=applied)

    async def Status(self, request: pb.StatusRequest, context: Any) -> pb.StatusResponse:  # noqa: N802
        s = self._node.status()
        return pb.StatusResponse(
            id=s.node_id,
            address=s.address,
            role=s.role,
            term=s.term,
            leader=s.leader,
            leader_address=s.leader_address,
            commit_index=s.commit_index,
            applied_index=s.applied_index,
            last_index=s.last_index,
            first_index=s.first_index,
            snapshot_index=s.snapshot_index,
            followers=[pb.FollowerProgress(id=p, match_index=m, next_index=n, state=st) for p, m, n, st in s.followers],
            cluster_id=s.cluster_id,
            voters=s.voters,
            learners=s.learners,
            observers=s.observers,
            config_index=s.config_index,
            members=s.members,
        )

    async def ChangeMembership(  # noqa: N802
        self, request: pb.ChangeMembershipRequest, context: Any
    ) -> pb.ChangeMembershipResponse:
        try:
            kind = ChangeKind(request.kind)
        except ValueError:
            await abort_with(context, errors.MembershipChangeError(f"unknown membership change kind {request.kind}"))
        remaining = context.time_remaining()
        timeout_s = self._node.settings.proposal_timeout_ms / 1000 if remaining is None else max(remaining, 0.0)
        try:
            index = await self._node.change_membership(kind, request.node_id, request.address, timeout_s)
        except errors.QuorumError as exc:
            await abort_with(context, exc)
        return pb.ChangeMembershipResponse(index=index)

    async def TransferLeadership(  # noqa: N802
        self, request: pb.TransferLeadershipRequest, context: Any
    ) -> pb.TransferLeadershipResponse:
        timeout_s = 2 * self._node.settings.election_timeout_ticks * self._node.settings.tick_ms / 1000
        leader = await self._node.transfer_leadership(request.target, timeout_s)
        return pb.TransferLeadershipResponse(leader=leader)
