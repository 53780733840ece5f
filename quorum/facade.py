"""The quorum as an application hosted in a node sees it: one class, and the types it names.

zkemu imports nothing else from quorum (tests/test_zkemu_quorum_boundary.py
holds it to that). What it needs of the node:
* writes: `propose_nowait` (one entry per command), `propose_prefix_nowait`
  (the longest prefix the leader takes), `propose` (awaited);
* reads: `read_index` (ReadIndex, Raft thesis §6.4: the barrier before a
  linearizable read), `wait_applied`, `applied_index`; the read view itself is
  the application's own state machine, which the node applies entries to;
* leadership: `is_leader`, `leader_id`, `term`, `leader_address` (where a
  follower forwards writes: forwarding is the application's, over its own
  gRPC service), `role_since_s`, `follower_states`; zkemu polls these from its
  own timers, so the facade has no event stream to keep; a write that finds
  no leader waits on `leadership_changed` (bounded) instead of a fixed pause;
* status and tuning: `status`, `read_index_rounds_in_flight`,
  `set_commit_interest`; the process's latency histograms (`RAFT_LATENCY_HISTOGRAMS`,
  `WAL_FSYNC`: quorum.latency_metrics), which zkemu publishes;
* membership: `configuration` (voters, learners, observers, their addresses
  and the configuration's version), `change_membership` (at the leader, from any
  node: quorum.member_changes), `add_voter` (a learner, caught up, then promoted)
  and `entry_configuration` (the configuration a CONFIG entry makes, for a state
  machine that shows it, as zkemu's /zookeeper/config does);
* the node's life: `run_hosted` builds and runs a node with its settings, the
  state machine and the hosted service, which gets the facade when it is
  registered.

Methods are the node's own bound methods (no wrapper call or await on the
write path).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from quorum.address_book import decode_addresses
from quorum.deadline import await_owned
from quorum.errors import (
    MembershipChangeError,
    NotLeaderError,
    ProposalDroppedError,
    ProposalLostError,
    QuorumError,
    QuorumTimeoutError,
    StartupError,
)
from quorum.latency_metrics import RAFT_LATENCY_HISTOGRAMS, WAL_FSYNC
from quorum.member_changes import add_voter_at_leader, change_at_leader
from quorum.node import NodeStatus, QuorumNode
from quorum.raft import Role
from quorum.raft.errors import invariant
from quorum.raft.membership import ChangeKind, decode_config
from quorum.raft.types import Entry, EntryKind
from quorum.server import configure_logging, run_node
from quorum.settings import EXTENDED_SERVER_ID_MAX, FOUR_LETTER_WORDS, FOUR_LETTER_WORDS_NOT_SERVED, NodeSettings
from quorum.state_check import DamagedRecordError, is_damage, mark_damaged, open_read_only, set_aside_if_damaged
from quorum.state_machine import StateMachine
from quorum.transport import GRPC_OPTIONS

__all__ = [
    "EXTENDED_SERVER_ID_MAX",
    "FOUR_LETTER_WORDS",
    "FOUR_LETTER_WORDS_NOT_SERVED",
    "GRPC_OPTIONS",
    "RAFT_LATENCY_HISTOGRAMS",
    "WAL_FSYNC",
    "ChangeKind",
    "ClusterConfiguration",
    "DamagedRecordError",
    "Entry",
    "EntryKind",
    "HostedService",
    "MembershipChangeError",
    "NodeSettings",
    "NodeStatus",
    "NotLeaderError",
    "ProposalDroppedError",
    "ProposalLostError",
    "QuorumError",
    "QuorumFacade",
    "QuorumTimeoutError",
    "StartupError",
    "StateMachine",
    "await_owned",
    "configure_logging",
    "entry_configuration",
    "invariant",
    "is_damage",
    "mark_damaged",
    "open_read_only",
    "run_hosted",
    "set_aside_if_damaged",
]

Outcomes = list[tuple[int, bytes]]  # (log index, the state machine's result) of each command


@dataclass(frozen=True, slots=True)
class ClusterConfiguration:
    version: int  # the index of the entry that made it (0: the peer list the cluster started with)
    voters: tuple[int, ...]
    learners: tuple[int, ...]
    observers: tuple[int, ...]
    addresses: dict[int, str]  # host:port of every member


def entry_configuration(entry: Entry) -> ClusterConfiguration:
    """The configuration a CONFIG entry makes, as every node reads it from the entry alone (its version is the
    entry's index, its addresses the entry's address book); ValueError when the entry's data is malformed."""
    _, membership = decode_config(entry.data)
    book = decode_addresses(membership.context)
    addresses = {m: book[m] for m in membership.members if m in book}
    return ClusterConfiguration(entry.index, membership.voters, membership.learners, membership.observers, addresses)


class QuorumFacade:
    """One quorum node, as the application it hosts uses it."""

    __slots__ = (
        "_node",
        "node_id",
        "settings",
        "propose",
        "propose_nowait",
        "propose_prefix_nowait",
        "read_index",
        "wait_applied",
        "set_commit_interest",
        "status",
        "read_index_rounds_in_flight",
        "leadership_changed",
    )

    def __init__(self, node: QuorumNode) -> None:
        self._node = node
        self.node_id: int = node.node_id
        self.settings: NodeSettings = node.settings
        # Writes. propose: the commands as consecutive entries, awaited, timed out after timeout_s.
        self.propose: Callable[[Sequence[bytes], float], Coroutine[Any, Any, Outcomes]] = node.propose_many
        # Appended now, or QuorumError at once; the future resolves once every one is applied.
        self.propose_nowait: Callable[[Sequence[bytes]], asyncio.Future[Outcomes]] = node.propose_nowait
        # The longest prefix the leader takes now; the future has each one's outcome and what stopped the rest.
        self.propose_prefix_nowait: Callable[
            [Sequence[bytes]], asyncio.Future[tuple[Outcomes, BaseException | None]]
        ] = node.propose_prefix_nowait
        # Reads: an index that, once applied here, makes a read linearizable; and the wait for it.
        self.read_index: Callable[[float], Coroutine[Any, Any, int]] = node.read_index
        self.wait_applied: Callable[[int, float], Coroutine[Any, Any, None]] = node.wait_applied
        # Whether this node, as a follower, must learn each commit at once (QuorumNode.set_commit_interest).
        self.set_commit_interest: Callable[[bool], None] = node.set_commit_interest
        self.status: Callable[[], NodeStatus] = node.status
        self.read_index_rounds_in_flight: Callable[[], int] = node.read_index_rounds_in_flight
        # Returns at this node's next change of role or leader, or after the timeout (an election's end).
        self.leadership_changed: Callable[[float], Coroutine[Any, Any, None]] = node.leadership_changed

    # The Raft core's fields every request reads (a reply's zxid, the write router's decision): read
    # here in one hop, as zkemu read them before there was a facade, not through a QuorumNode property.
    @property
    def applied_index(self) -> int:
        """The last entry applied to the state machine here (zkemu's zxid)."""
        return self._node.core.applied_index

    @property
    def is_leader(self) -> bool:
        return self._node.core.role is Role.LEADER

    @property
    def leader_id(self) -> int:
        """The leader this node knows of, itself while it leads; 0 while none is known."""
        return self._node.core.leader_id

    @property
    def term(self) -> int:
        return self._node.core.term

    @property
    def serving(self) -> bool:
        """Leading, or following a known leader (not in an election)."""
        return (self.is_leader or self._node.following) and self.leader_id != 0

    def leader_address(self) -> str:
        """The known leader's peer address (its gRPC port, where the application's services listen too);
        "" while none is known."""
        return self._node.address_of(self.leader_id)

    def address_of(self, node_id: int) -> str:
        return self._node.address_of(node_id)

    @property
    def role_since_s(self) -> float:
        """time.monotonic() when this node took its current role."""
        return self._node.role_since_s

    @property
    def voter_count(self) -> int:
        return len(self._node.core.membership.voters)

    def configuration(self) -> ClusterConfiguration:
        """The configuration this node uses now (Raft dissertation §4.1: the latest in its log, committed or
        not): what ZooKeeper's /zookeeper/config and getConfig show, `version` being its entry's index."""
        core = self._node.core
        m = core.membership
        return ClusterConfiguration(core.config_index, m.voters, m.learners, m.observers, self._node.addresses)

    async def change_membership(self, kind: ChangeKind, node_id: int, address: str, timeout_s: float) -> int:
        """One single-server change made by the leader (asked over the quorum's gRPC service when this node
        follows), returned once committed and applied here (ZooKeeper's reconfig maps onto it: -add as a
        learner then its promotion, -remove); MembershipChangeError says why one is refused."""
        return await change_at_leader(self._node, kind, node_id, address, timeout_s)

    async def add_voter(self, node_id: int, address: str, timeout_s: float, catch_up_timeout_s: float) -> int:
        """Add `node_id` as a learner, then promote it once caught up (what `zkraft quorum add` does); returns
        the promotion's index."""
        return await add_voter_at_leader(self._node, node_id, address, timeout_s, catch_up_timeout_s)

    def follower_states(self) -> list[str]:
        """While leading, each follower's replication state ("probe", "replicate", "snapshot"); else []."""
        return self._node.follower_states()

    def follower_states_by_id(self) -> dict[int, str]:
        """While leading, the replication state of each member it replicates to, by id; else {}."""
        return {member: state for member, (_match, _next, state) in self._node.core.progress().items()}


class HostedService(Protocol):
    """A service that runs inside a quorum node process (zkemu's ZooKeeper service)."""

    def register(self, quorum: QuorumFacade, server: grpc.aio.Server) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class _Hosting:
    """The node runner's extension hook, handing the hosted service the facade instead of the node."""

    def __init__(self, service: HostedService) -> None:
        self._service = service

    def register(self, node: QuorumNode, server: grpc.aio.Server) -> None:
        self._service.register(QuorumFacade(node), server)

    async def start(self) -> None:
        await self._service.start()

    async def stop(self) -> None:
        await self._service.stop()


async def run_hosted(
    settings: NodeSettings, state_machine: StateMachine, service: HostedService, stop: asyncio.Event | None = None
) -> int:
    """Run a quorum node with `settings` applying entries to `state_machine`, `service` registered on its
    gRPC server and started with it, until `stop` is set or the process is told to stop; returns the exit
    status (quorum.server.run_node)."""
    return await run_node(settings, stop, state_machine=state_machine, extension=_Hosting(service))
