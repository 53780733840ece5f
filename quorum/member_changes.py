"""Membership changes asked of any node: made by the leader, waited for here.

ZooKeeper forwards a client's reconfig from the server it is connected to to the leader, which runs it
(PrepRequestProcessor on the leader). A zkemu node does the same with a single-server change
(quorum.raft.membership): while it leads, it proposes the change itself; while it follows, it asks the
leader over the quorum's own gRPC service (ChangeMembership, the call `zkraft quorum add` makes), then
waits until the change is applied here too, so that what it answers next shows it. `add_voter_at_leader`
is `zkraft quorum add`'s sequence (zkraft.tools.quorum_members) for a server process: a learner, caught
up (Raft dissertation §4.2.1), then promoted; one that does not catch up in time is removed again, so a
failed add leaves the configuration as it was.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import grpc

from quorum import errors
from quorum.raft import Role
from quorum.raft.membership import ChangeKind, MemberRole
from quorum.transport import GRPC_OPTIONS
from runtime import grpc_channels
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from quorum.node import QuorumNode

ATTEMPTS_MAX = 20  # leaders looked for before giving up (each bounded by the deadline too)
CATCH_UP_POLL_S = 0.1  # between two promotions refused because the learner still lags
# The leader's refusals that a later attempt may not meet (quorum.raft.core propose_conf_change).
_FRESH_LEADER = "has not committed an entry of its term yet"  # gone within a round trip of its election
_NOT_YET = ("not caught up", _FRESH_LEADER)
# A leader's answer, by the code quorum.service.abort_with names, back into the error it raised.
_ERROR_OF_CODE: dict[str, type[errors.QuorumError]] = {
    cls.code: cls
    for cls in (
        errors.MembershipChangeError,
        errors.ProposalDroppedError,
        errors.ProposalLostError,
        errors.QuorumTimeoutError,
        errors.ShuttingDownError,
    )
}


async def change_at_leader(node: QuorumNode, kind: ChangeKind, node_id: int, address: str, timeout_s: float) -> int:
    """One single-server change made by the leader, returned once applied here (its entry's index)."""
    deadline = time.monotonic() + timeout_s
    for _ in range(ATTEMPTS_MAX):
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            break
        leader_address = node.address_of(node.core.leader_id) if node.core.leader_id else ""
        if node.core.role is not Role.LEADER and not leader_address:
            await node.leadership_changed(remaining_s)  # an election: its end, or the deadline
            continue
        try:
            if node.core.role is Role.LEADER:
                return await node.change_membership(kind, node_id, address, remaining_s)
            index = await _ask_leader(node, leader_address, kind, node_id, address, remaining_s)
        except errors.MembershipChangeError as exc:
            # A change asked right after an election (a reconfig after the leader's own removal): wait for the
            # new leader's first entry to commit instead of failing the change.
            if _FRESH_LEADER not in str(exc):
                raise
            await asyncio.sleep(CATCH_UP_POLL_S)
            continue
        if index:
            await node.wait_applied(index, max(deadline - time.monotonic(), 0.0))
            return index
        await node.leadership_changed(min(remaining_s, _election_s(node)))
    raise errors.QuorumTimeoutError(f"no leader made the membership change of node {node_id} in {timeout_s:.1f} s")


def _election_s(node: QuorumNode) -> float:
    s = node.settings
    return s.election_timeout_ticks * s.tick_ms / 1000


async def _ask_leader(
    node: QuorumNode, leader_address: str, kind: ChangeKind, node_id: int, address: str, timeout_s: float
) -> int:
    """The leader's index for the change; 0 when the leader did not answer or no longer leads (try again)."""
    request = pb.ChangeMembershipRequest(kind=kind, node_id=node_id, address=address)
    async with grpc_channels.aio_channel(leader_address, node.settings.peer_tls, GRPC_OPTIONS) as channel:
        try:
            reply = await pb_grpc.QuorumStub(channel).ChangeMembership(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            code = str(dict(exc.trailing_metadata() or ()).get("error-code", ""))
            error = _ERROR_OF_CODE.get(code)
            if error is not None:
                raise error(exc.details() or code) from None
            return 0  # NOT_LEADER, or no answer: the caller looks for the leader again
    return int(reply.index)


async def add_voter_at_leader(
    node: QuorumNode, node_id: int, address: str, timeout_s: float, catch_up_timeout_s: float
) -> int:
    """`node_id` added as a learner, then promoted to voter once caught up; its promotion's index. A learner
    that does not catch up within `catch_up_timeout_s` (not running, or not started with --join) is removed
    again and MembershipChangeError says so."""
    role = node.core.membership.role_of(node_id)
    if role is None:
        await change_at_leader(node, ChangeKind.ADD_LEARNER, node_id, address, timeout_s)
    elif role is not MemberRole.LEARNER:
        raise errors.MembershipChangeError(f"node {node_id} is already a member ({role.value})")
    deadline = time.monotonic() + catch_up_timeout_s
    while True:
        try:
            return await change_at_leader(node, ChangeKind.PROMOTE, node_id, "", timeout_s)
        except errors.MembershipChangeError as exc:
            if not any(reason in str(exc) for reason in _NOT_YET):
                raise
            if time.monotonic() > deadline:
                await change_at_leader(node, ChangeKind.REMOVE, node_id, "", timeout_s)
                raise errors.MembershipChangeError(
                    f"node {node_id} did not catch up within {catch_up_timeout_s:.1f} s and was removed again (is it "
                    f"running, started with --join? `zkraft quorum add` waits for a long catch-up): {exc}"
                ) from None
        await asyncio.sleep(CATCH_UP_POLL_S)  # the learner's progress is the leader's; polled, under the deadline
