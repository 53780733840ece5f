"""`zkraft quorum add | remove | transfer-leadership`: change a running quorum's shape (issue 32).

    zkraft quorum add --server 127.0.0.1:7001 --id 4 --address 127.0.0.1:7004 [--observer]
    zkraft quorum remove --server 127.0.0.1:7001 --id 3
    zkraft quorum transfer-leadership --server 127.0.0.1:7001 --to 2

`add` asks the leader to add the node as a learner (Raft dissertation §4.2.1: it catches up without
counting), prints its progress until its log is close to the leader's, then promotes it to voter; with
--observer it stays a non-voting member for good (ZooKeeper's observers). Each change is one
single-server change, answered once committed. Every refusal is one line and exit status 1.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TextIO

import grpc

from runtime import grpc_channels
from runtime.tls import TlsConfig
from zkraft.tools.quorum_status import QuorumStatusError, ServerListError, parse_server_list, query_all
from zkraft_proto import quorum_pb2, quorum_pb2_grpc

# quorum.raft.membership.ChangeKind, by value (a client tool imports no server package).
ADD_LEARNER, ADD_OBSERVER, PROMOTE, REMOVE = 1, 2, 3, 4
CHANGE_TIMEOUT_S_DEFAULT = 10.0
CATCH_UP_TIMEOUT_S_DEFAULT = 120.0
POLL_INTERVAL_S = 0.2


class MembershipError(QuorumStatusError):
    """A refusal or failure the tool reports as one line."""


__all__ = ["MembershipError", "QuorumStatusError", "ServerListError", "add", "remove", "transfer_leadership"]


def _leader(servers: Sequence[str], timeout_s: float, tls: TlsConfig | None) -> quorum_pb2.StatusResponse:
    answers = query_all(servers, timeout_s, tls)
    replies = [a for a in answers if not isinstance(a, str)]
    if not replies:
        raise MembershipError("no quorum server answered: " + "; ".join(str(a) for a in answers))
    leaders = [r for r in replies if r.role == "leader"]
    if leaders:
        return max(leaders, key=lambda r: r.term)
    known = next((r for r in replies if r.leader_address), None)
    if known is None:
        raise MembershipError("the quorum has no leader (election in progress, or too few nodes up)")
    answer = query_all([known.leader_address], timeout_s, tls)[0]
    if isinstance(answer, str) or answer.role != "leader":
        raise MembershipError(f"the leader at {known.leader_address} did not answer as leader")
    return answer


def _change(address: str, kind: int, node_id: int, peer: str, timeout_s: float, tls: TlsConfig | None) -> int:
    channel = grpc_channels.sync_channel(address, tls)
    try:
        reply = quorum_pb2_grpc.QuorumStub(channel).ChangeMembership(
            quorum_pb2.ChangeMembershipRequest(kind=kind, node_id=node_id, address=peer), timeout=timeout_s
        )
        return int(reply.index)
    except grpc.RpcError as error:
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        raise MembershipError(details or "the membership change failed") from None
    finally:
        channel.close()


def _member_of(status: quorum_pb2.StatusResponse, node_id: int) -> str:
    for role, ids in (("voter", status.voters), ("learner", status.learners), ("observer", status.observers)):
        if node_id in ids:
            return role
    return ""


def add(
    servers: str,
    node_id: int,
    address: str,
    *,
    observer: bool = False,
    timeout_s: float = CHANGE_TIMEOUT_S_DEFAULT,
    catch_up_timeout_s: float = CATCH_UP_TIMEOUT_S_DEFAULT,
    out: TextIO,
    tls: TlsConfig | None = None,
) -> int:
    addresses = parse_server_list(servers)
    leader = _leader(addresses, timeout_s, tls)
    role = _member_of(leader, node_id)
    if role and not (role == "learner" and not observer):
        raise MembershipError(f"node {node_id} is already a member ({role})")
    if not role:
        kind = ADD_OBSERVER if observer else ADD_LEARNER
        index = _change(leader.address, kind, node_id, address, timeout_s, tls)
        print(f"added node {node_id} at {address} as {'an observer' if observer else 'a learner'} (entry {index})",
              file=out, flush=True)  # fmt: skip
    if observer:
        return 0
    return _promote_when_caught_up(addresses, node_id, timeout_s, catch_up_timeout_s, out, tls)


def _promote_when_caught_up(
    servers: Sequence[str],
    node_id: int,
    timeout_s: float,
    catch_up_timeout_s: float,
    out: TextIO,
    tls: TlsConfig | None,
) -> int:
    """Print the learner's progress until the leader takes its promotion (it refuses while the learner lags)."""
    deadline = time.monotonic() + catch_up_timeout_s
    last_report = ""
    while True:
        leader = _leader(servers, timeout_s, tls)
        match = next((p.match_index for p in leader.followers if p.id == node_id), 0)
        report = f"node {node_id}: log at {match} of the leader's {leader.last_index}"
        if report != last_report:
            print(report, file=out, flush=True)
            last_report = report
        try:
            index = _change(leader.address, PROMOTE, node_id, "", timeout_s, tls)
        except MembershipError as error:
            if "not caught up" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(POLL_INTERVAL_S)
            continue
        print(f"promoted node {node_id} to voter (entry {index})", file=out, flush=True)
        return 0


def remove(servers: str, node_id: int, *, timeout_s: float = CHANGE_TIMEOUT_S_DEFAULT, out: TextIO,
           tls: TlsConfig | None = None) -> int:  # fmt: skip
    addresses = parse_server_list(servers)
    leader = _leader(addresses, timeout_s, tls)
    if node_id == leader.id and len(leader.voters) > 1:
        # The leader hands over first (Raft dissertation §3.10), then the new leader removes it: no time spent
        # by a leader outside its own configuration (§4.2.2), nor an election after it steps down.
        target = max((p for p in leader.followers if p.id in leader.voters), key=lambda p: p.match_index).id
        transfer_leadership(servers, target, timeout_s=timeout_s, out=out, tls=tls)
        leader = _leader(addresses, timeout_s, tls)
    index = _change(leader.address, REMOVE, node_id, "", timeout_s, tls)
    print(f"removed node {node_id} (entry {index})", file=out, flush=True)
    return 0


def transfer_leadership(
    servers: str, target: int, *, timeout_s: float = CHANGE_TIMEOUT_S_DEFAULT, out: TextIO,
    tls: TlsConfig | None = None,
) -> int:  # fmt: skip
    leader = _leader(parse_server_list(servers), timeout_s, tls)
    if target not in leader.voters:
        raise MembershipError(f"node {target} is not a voter: {list(leader.voters)}")
    if target == leader.id:
        print(f"node {target} already leads", file=out, flush=True)
        return 0
    channel = grpc_channels.sync_channel(leader.address, tls)
    try:
        reply = quorum_pb2_grpc.QuorumStub(channel).TransferLeadership(
            quorum_pb2.TransferLeadershipRequest(target=target), timeout=timeout_s
        )
    except grpc.RpcError as error:
        raise MembershipError(error.details() if isinstance(error, grpc.Call) else str(error)) from None
    finally:
        channel.close()
    if reply.leader != target:
        raise MembershipError(f"node {target} did not take over (the leader is now {reply.leader or 'unknown'})")
    print(f"node {target} leads", file=out, flush=True)
    return 0
