"""`zkraft quorum status`: one table of every quorum node's Raft state (ZooKeeper's srvr/mntr, condensed).

    zkraft quorum status --server 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003

Each server is asked `Quorum.Status` in parallel with a per-call deadline. A
follower's lag is the leader's last index minus the follower's match index as
the leader sees it (`FollowerProgress`), so it is only known when the leader
answered. A client tool: it imports only the generated stubs and grpc.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import TextIO

import grpc

from runtime import grpc_channels
from runtime.tls import TlsConfig
from zkraft_proto import quorum_pb2, quorum_pb2_grpc

STATUS_TIMEOUT_S_DEFAULT = 2.0
# One thread per server asked; a quorum has at most 7 voters, this bounds a long --server list.
QUERY_THREADS_MAX = 16
ROLE_UNREACHABLE = "unreachable"
KNOWN_ROLES = ("leader", "follower", "candidate")

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.%a-zA-Z]+\]|[^\s:\[\]]+):(\d+)$")


class QuorumStatusError(Exception):
    """A failure the tool reports as one line (nobody answered)."""


class ServerListError(QuorumStatusError):
    """The --server list or --timeout is malformed: a usage error."""


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One row: what one server said about itself, or that it did not answer."""

    id: int | None
    address: str  # as given on the command line
    role: str  # leader, follower, candidate, unreachable (or the server's word if unknown)
    term: int | None
    leader: int | None  # the leader's id as this node knows it; None when it knows none
    commit_index: int | None
    applied_index: int | None
    last_index: int | None
    first_index: int | None
    snapshot_index: int | None
    cluster_id: str | None
    lag: int | None  # followers only, from the leader's progress; None when unknown
    error: str | None  # why an unreachable node did not answer
    # voter, learner, observer or removed, in the configuration of the leader (else of the node itself).
    member: str | None = None

    @property
    def reachable(self) -> bool:
        return self.role != ROLE_UNREACHABLE


def parse_server_list(text: str) -> list[str]:
    """Split `h:p,h:p`; duplicates are dropped, order kept."""
    addresses: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _HOST_PORT.match(item)
        if match is None:
            raise ServerListError(f"--server: {item!r} is not host:port")
        if not 1 <= int(match.group(1)) <= 65535:
            raise ServerListError(f"--server: port in {item!r} is out of range 1-65535")
        if item not in addresses:
            addresses.append(item)
    if not addresses:
        raise ServerListError("--server: no address given (expected host:port[,host:port...])")
    return addresses


def normalize_role(role: str) -> str:
    word = role.strip().lower().replace("_", "-")
    if word.startswith("state"):  # an enum's name, e.g. STATE_LEADER
        word = word.removeprefix("state").lstrip("-")
    if "candidate" in word:  # pre-candidate is a candidate to a user
        return "candidate"
    return word or "unknown"


def _rpc_error_text(error: grpc.RpcError) -> str:
    code = error.code() if isinstance(error, grpc.Call) else None
    details = error.details() if isinstance(error, grpc.Call) else str(error)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return "no answer before the deadline"
    if code == grpc.StatusCode.UNAVAILABLE:
        if details and "Connection refused" in details:
            return "connection refused"
        return f"unavailable: {details}" if details else "unavailable"
    name = code.name if code is not None else "error"
    return f"{name}: {details}" if details else name


def query_status(address: str, timeout_s: float, tls: TlsConfig | None = None) -> quorum_pb2.StatusResponse | str:
    """Ask one server; return its answer, or one line saying why there is none."""
    channel = grpc_channels.sync_channel(address, tls)
    try:
        stub = quorum_pb2_grpc.QuorumStub(channel)
        response: quorum_pb2.StatusResponse = stub.Status(quorum_pb2.StatusRequest(), timeout=timeout_s)
        return response
    except grpc.RpcError as error:
        details = error.details() if isinstance(error, grpc.Call) else ""
        return grpc_channels.explain_failure(address, tls, details or "") or _rpc_error_text(error)
    finally:
        channel.close()


def query_peers(address: str, timeout_s: float, tls: TlsConfig | None = None) -> dict[str, int]:
    """The peer list (address -> id) a node was started with, from its Hello answer (no side effect); {} on error."""
    channel = grpc_channels.sync_channel(address, tls)
    try:
        reply = quorum_pb2_grpc.RaftPeerStub(channel).Hello(quorum_pb2.HelloRequest(), timeout=timeout_s)
    except grpc.RpcError:
        return {}
    finally:
        channel.close()
    peers: dict[str, int] = {}
    for item in reply.peers.split(","):
        node_id, _, peer_address = item.partition("=")
        if node_id.strip().isdigit() and peer_address:
            peers[peer_address.strip()] = int(node_id)
    return peers


def _same_endpoint(given: str, known: str) -> bool:
    """`localhost:7001` given on the command line is the peer the nodes know as `127.0.0.1:7001`."""
    if given == known:
        return True
    given_host, _, given_port = given.rpartition(":")
    known_host, _, known_port = known.rpartition(":")
    return given_port == known_port and {given_host.strip("[]"), known_host.strip("[]")} <= _LOOPBACK_NAMES


def name_unreachable(rows: list[NodeStatus], peers: dict[str, int]) -> list[NodeStatus]:
    """A node that did not answer gets the id its peers know it by (their peer list), when it is in it."""
    named = []
    for row in rows:
        if not row.reachable and row.id is None:
            ids = [node_id for address, node_id in peers.items() if _same_endpoint(row.address, address)]
            if len(ids) == 1:
                row = replace(row, id=ids[0])
        named.append(row)
    return named


def collect_status(
    addresses: Sequence[str], timeout_s: float = STATUS_TIMEOUT_S_DEFAULT, tls: TlsConfig | None = None
) -> list[NodeStatus]:
    """Ask every address in parallel and build one row per address, in the order given."""
    answers = query_all(addresses, timeout_s, tls)
    rows = build_rows(addresses, answers)
    answering = next((row.address for row in rows if row.reachable), None)
    if answering is not None and any(not row.reachable for row in rows):
        rows = name_unreachable(rows, query_peers(answering, timeout_s, tls))
    return rows


def query_all(
    addresses: Sequence[str], timeout_s: float, tls: TlsConfig | None = None
) -> list[quorum_pb2.StatusResponse | str]:
    workers = max(1, min(len(addresses), QUERY_THREADS_MAX))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="quorum-status") as pool:
        return list(pool.map(lambda address: query_status(address, timeout_s, tls), addresses))


def _find_leader(answers: Sequence[quorum_pb2.StatusResponse | str]) -> quorum_pb2.StatusResponse | None:
    """The answer of the leader of the highest term seen (an old leader cut off may still think it leads)."""
    leaders = [a for a in answers if not isinstance(a, str) and normalize_role(a.role) == "leader"]
    return max(leaders, key=lambda a: a.term, default=None)


def build_rows(addresses: Sequence[str], answers: Sequence[quorum_pb2.StatusResponse | str]) -> list[NodeStatus]:
    leader = _find_leader(answers)
    match_index = {p.id: p.match_index for p in leader.followers} if leader is not None else {}
    config = leader or next((a for a in answers if not isinstance(a, str)), None)
    rows = []
    for address, answer in zip(addresses, answers, strict=True):
        if isinstance(answer, str):
            rows.append(_unreachable_row(address, answer))
            continue
        role = normalize_role(answer.role)
        lag = None
        if role == "follower" and leader is not None and answer.id in match_index and answer.term == leader.term:
            lag = max(0, leader.last_index - match_index[answer.id])
        rows.append(
            NodeStatus(
                id=answer.id or None,
                address=address,
                role=role,
                term=answer.term,
                leader=answer.leader or None,
                commit_index=answer.commit_index,
                applied_index=answer.applied_index,
                last_index=answer.last_index,
                first_index=answer.first_index,
                snapshot_index=answer.snapshot_index,
                cluster_id=answer.cluster_id or None,
                lag=lag,
                error=None,
                member=_member_role(config, answer.id) if config is not None else None,
            )
        )
    return rows


def _member_role(config: quorum_pb2.StatusResponse, node_id: int) -> str | None:
    if not config.voters:
        return None  # a server from before membership changes
    if node_id in config.voters:
        return "voter"
    if node_id in config.learners:
        return "learner"
    if node_id in config.observers:
        return "observer"
    return "removed"


def configuration_line(answers: Sequence[quorum_pb2.StatusResponse | str]) -> str | None:
    """The configuration the leader (else any node answering) uses, in one line."""
    config = _find_leader(answers) or next((a for a in answers if not isinstance(a, str)), None)
    if config is None or not config.voters:
        return None

    def ids(values: Sequence[int]) -> str:
        return ",".join(str(v) for v in values) or "-"

    return (
        f"configuration (index {config.config_index}): voters {ids(config.voters)}, "
        f"learners {ids(config.learners)}, observers {ids(config.observers)}"
    )


def _unreachable_row(address: str, error: str) -> NodeStatus:
    # The id of a node that did not answer comes later from a live peer's peer list (name_unreachable).
    return NodeStatus(
        id=None,
        address=address,
        role=ROLE_UNREACHABLE,
        term=None,
        leader=None,
        commit_index=None,
        applied_index=None,
        last_index=None,
        first_index=None,
        snapshot_index=None,
        cluster_id=None,
        lag=None,
        error=error,
    )


_COLUMNS = (
    ("id", "id"),
    ("address", "address"),
    ("role", "role"),
    ("term", "term"),
    ("leader", "leader"),
    ("commit", "commit_index"),
    ("applied", "applied_index"),
    ("last index", "last_index"),
    ("lag", "lag"),
    ("member", "member"),
)


def format_table(rows: Sequence[NodeStatus]) -> str:
    cells = [[title for title, _ in _COLUMNS]]
    for row in rows:
        values = asdict(row)
        cells.append(["-" if values[key] is None else str(values[key]) for _, key in _COLUMNS])
    widths = [max(len(line[column]) for line in cells) for column in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in cells]
    for row in rows:
        if row.error:
            lines.append(f"{row.address}: {row.error}")
    cluster_ids = sorted({row.cluster_id for row in rows if row.cluster_id})
    if len(cluster_ids) > 1:
        lines.append(f"warning: servers belong to different clusters: {', '.join(cluster_ids)}")
    return "\n".join(lines)


def format_json(rows: Sequence[NodeStatus]) -> str:
    return json.dumps([asdict(row) for row in rows])


def run(
    servers: str,
    *,
    json_output: bool = False,
    timeout_s: float = STATUS_TIMEOUT_S_DEFAULT,
    out: TextIO | None = None,
    tls: TlsConfig | None = None,
) -> int:
    """The tool: print the table (or JSON); return 0 when a leader answered, 1 when the quorum has none
    (an orchestrator's check fails then, as it does on ZooKeeper's `srvr` saying "not currently serving").

    Raises QuorumStatusError (one line) for a bad server list or when no server answered.
    """
    if not timeout_s > 0:
        raise ServerListError(f"--timeout: must be > 0 seconds, got {timeout_s}")
    addresses = parse_server_list(servers)
    answers = query_all(addresses, timeout_s, tls)
    rows = build_rows(addresses, answers)
    answering = next((row.address for row in rows if row.reachable), None)
    if answering is not None and any(not row.reachable for row in rows):
        rows = name_unreachable(rows, query_peers(answering, timeout_s, tls))
    if not any(row.reachable for row in rows):
        reasons = "; ".join(f"{row.address}: {row.error}" for row in rows)
        raise QuorumStatusError(f"no quorum server answered ({reasons})")
    stream = out if out is not None else sys.stdout
    config = None if json_output else configuration_line(answers)
    stream.write((format_json(rows) if json_output else format_table(rows)) + (f"\n{config}" if config else "") + "\n")
    stream.flush()
    if not any(row.role == "leader" or row.leader for row in rows if row.reachable):
        print("error: the quorum has no leader (election in progress, or too few nodes up)", file=sys.stderr)
        return 1
    return 0
