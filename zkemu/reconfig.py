"""ZooKeeper's reconfig (OpCode 16) as the quorum's single-server changes.

`plan` runs PrepRequestProcessor's checks on a ReconfigRequest, in its order, against the configuration
this node uses: a reconfiguration in progress (a learner still catching up) is RECONFIGINPROGRESS, a
`curConfigId` other than -1 and /zookeeper/config's version is BADVERSION, a server string that does not parse is
BADARGUMENTS. The outcome is a list of steps, removals first, then additions (ZooKeeper removes the
leaving servers from the map before it puts the joining ones). Raft changes one server at a time
(dissertation §4.1), so each step is one change, made and committed before the next; a non-incremental
`-members` is taken only when it differs from the current membership by one server (else BADARGUMENTS
names how many, and that -add/-remove do one at a time). `execute` makes the steps: a removal; an observer
added; a participant added as a learner, caught up and promoted (QuorumFacade.add_voter); then the
client address the server string named goes into /zookeeper/config (zkemu.config_announcer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quorum.facade import ChangeKind, ClusterConfiguration, MembershipChangeError, QuorumError, QuorumFacade
from zkemu import acl
from zkemu.config_announcer import announce
from zkemu.config_text import NO_ELECTION_PORT, OBSERVER, ConfigTextError, ServerSpec, parse_members, parse_server
from zkemu.errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    NewConfigNoQuorumError,
    ReconfigInProgressError,
    ZkError,
)
from zkemu.paths import CONFIG_PATH
from zkemu.stat import Stat
from zkemu.tree import ZnodeTree
from zkemu.write_router import WriteRouter
from zkraft_proto import zk_pb2

__all__ = ["Step", "execute", "plan", "reconfigure"]

# A joining server's time to catch up before the reconfig gives up on it and removes it again: a third of the
# session's timeout (at least CATCH_UP_TIMEOUT_S_MIN), since the session's pings are answered after the reconfig
# and kazoo drops a connection whose ping goes unanswered for two thirds of it. ZooKeeper's joiner is already
# synced when its reconfig comes; a long catch-up is `zkraft quorum add`'s, which waits as long as it takes.
CATCH_UP_TIMEOUT_S_MIN = 2.0
CATCH_UP_TIMEOUT_S_MAX = 30.0


@dataclass(frozen=True, slots=True)
class Step:
    server_id: int
    add: ServerSpec | None = None  # None: remove the server


def plan(request: zk_pb2.ReconfigRequest, current: ClusterConfiguration, shown_version: int) -> list[Step]:
    """The single-server changes `request` asks for, or the ZkError ZooKeeper answers it with. `shown_version`
    is /zookeeper/config's (a learner's coming and going leaves it, zkemu.tree), which `-v` names."""
    if current.learners:
        raise ReconfigInProgressError(
            f"a reconfiguration is in progress: server {current.learners[0]} is still catching up"
        )
    if request.cur_config_id != -1 and request.cur_config_id != shown_version:
        raise BadVersionError(
            f"Reconfiguration from version {request.cur_config_id} failed -- last seen version is {shown_version}"
        )
    if request.HasField("new_members"):
        steps = _non_incremental(request.new_members, current)
    else:
        leaving = request.leaving_servers if request.HasField("leaving_servers") else ""
        joining = request.joining_servers if request.HasField("joining_servers") else ""
        steps = _leaving(leaving, current) + _joining(joining, current)
    voters = set(current.voters)
    for step in steps:
        voters.discard(step.server_id)
        if step.add is not None and step.add.role != OBSERVER:
            voters.add(step.server_id)
    if not voters:
        raise BadArgumentsError("Reconfig failed - new configuration must include at least 1 follower")
    return steps


def _leaving(text: str, current: ClusterConfiguration) -> list[Step]:
    steps = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if not item.isdigit():
            raise BadArgumentsError(f"leaving server {item!r} is not a server id")
        server_id = int(item)
        if server_id not in current.voters + current.observers:
            raise BadArgumentsError(f"leaving server {server_id} is not a member of the configuration")
        steps.append(Step(server_id))
    return steps


def _joining(text: str, current: ClusterConfiguration) -> list[Step]:
    steps = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise BadArgumentsError(f"Wrong format of server string {item!r}: expected server.<id>=<spec>")
        steps.append(_join_step(_server(key, value), current))
    return steps


def _server(key: str, value: str) -> ServerSpec:
    try:
        spec = parse_server(key if key.strip().startswith("server.") else f"server.{key.strip()}", value)
    except ConfigTextError as exc:
        raise BadArgumentsError(f"Wrong format of server string: {exc}") from None
    if spec.election_port not in (spec.quorum_port, NO_ELECTION_PORT):
        raise BadArgumentsError(
            f"server.{spec.server_id}: election port {spec.election_port} is not the quorum port "
            f"{spec.quorum_port}; one port carries Raft's elections and replication here: give it twice, or 0"
        )
    return spec


def _join_step(spec: ServerSpec, current: ClusterConfiguration) -> Step:
    """An addition; a server already in the configuration with the same address and role only gets its
    client address shown (a change of address or role is a -remove, then an -add)."""
    server_id = spec.server_id
    if server_id in current.voters + current.observers:
        role = OBSERVER if server_id in current.observers else "participant"
        if current.addresses.get(server_id) != spec.peer_address or role != spec.role:
            raise BadArgumentsError(
                f"server {server_id} is a member as {role} at {current.addresses.get(server_id)}: to change its "
                "address or role, remove it, then add it"
            )
    for member, address in current.addresses.items():
        if member != server_id and address == spec.peer_address:
            raise BadArgumentsError(f"server.{server_id}: {address} is already server {member}'s address")
    return Step(server_id, spec)


def _non_incremental(text: str, current: ClusterConfiguration) -> list[Step]:
    """-members / -file: one server more or one fewer than now, or the same membership."""
    try:
        servers, _ = parse_members(text.replace(",", "\n").splitlines())
    except ConfigTextError as exc:
        raise BadArgumentsError(f"Wrong format of server string: {exc}") from None
    wanted = {s.server_id: s for s in servers}
    members = set(current.voters + current.observers)
    removed = sorted(members - set(wanted))
    added = sorted(set(wanted) - members)
    if len(removed) + len(added) > 1:
        raise BadArgumentsError(
            f"the new membership differs from the current one by {len(removed) + len(added)} servers; zkraft "
            "changes one server at a time: use -add and -remove, one server each"
        )
    joins = [_join_step(_server(f"server.{s}", _spec_value(wanted[s])), current) for s in sorted(wanted)]
    # A kept server changes nothing but the client address its line names, if it names one.
    return [Step(s) for s in removed] + [j for j in joins if j.server_id in added or (j.add and j.add.client)]


def _spec_value(spec: ServerSpec) -> str:
    return spec.line().partition("=")[2]


async def execute(
    quorum: QuorumFacade, router: WriteRouter, steps: Sequence[Step], timeout_s: float, catch_up_timeout_s: float
) -> None:
    """Make each step, one committed single-server change after the other."""
    members = set(quorum.configuration().voters + quorum.configuration().observers)
    for step in steps:
        try:
            await _make(quorum, step, members, timeout_s, catch_up_timeout_s)
            if step.add is not None and step.add.client:
                await announce(router, step.server_id, step.add.client, timeout_s)
        except MembershipChangeError as exc:
            raise _zk_error(str(exc)) from None
        except QuorumError as exc:
            raise ConnectionLossError(f"the reconfiguration's outcome is unknown: {exc}") from None
        members = set(quorum.configuration().voters + quorum.configuration().observers)


async def _make(quorum: QuorumFacade, step: Step, members: set[int], timeout_s: float, catch_up_s: float) -> None:
    spec = step.add
    if spec is None:
        await quorum.change_membership(ChangeKind.REMOVE, step.server_id, "", timeout_s)
    elif step.server_id in members:
        return  # already a member as asked: only its client address is new
    elif spec.role == OBSERVER:
        await quorum.change_membership(ChangeKind.ADD_OBSERVER, step.server_id, spec.peer_address, timeout_s)
    else:
        await quorum.add_voter(step.server_id, spec.peer_address, timeout_s, catch_up_s)


def _zk_error(message: str) -> ZkError:
    """The code ZooKeeper answers for what the leader refused (PrepRequestProcessor's reconfig)."""
    if "in progress" in message:
        return ReconfigInProgressError(message)
    if "lose the quorum" in message or "did not catch up" in message:
        return NewConfigNoQuorumError(message)
    return BadArgumentsError(message)


async def reconfigure(
    quorum: QuorumFacade,
    router: WriteRouter,
    tree: ZnodeTree,
    request: zk_pb2.ReconfigRequest,
    ids: Sequence[acl.Id],
    timeout_s: float,
    session_timeout_ms: int,
) -> tuple[bytes, Stat]:
    """A client's reconfig, checked, made, and answered with /zookeeper/config's new data and Stat (the
    caller has checked reconfigEnabled). Checks in PrepRequestProcessor's order: the request's own, then
    WRITE on /zookeeper/config (a super user passes; ZooKeeper's default ACL there lets nobody else)."""
    steps = plan(request, quorum.configuration(), tree.get_data(CONFIG_PATH)[1].mzxid)
    entries, _ = tree.get_acl(CONFIG_PATH)
    acl.check(entries, acl.WRITE, ids, CONFIG_PATH)
    catch_up_s = min(max(session_timeout_ms / 3000, CATCH_UP_TIMEOUT_S_MIN), CATCH_UP_TIMEOUT_S_MAX)
    await execute(quorum, router, steps, timeout_s, catch_up_s)
    return tree.get_data(CONFIG_PATH)
