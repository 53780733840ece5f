"""A node's state machine fetched from a peer at start-up, when nothing of its own can rebuild it.

The log holds only the entries after its compaction point, so a state machine
rebuilt empty (its database damaged) needs a base at or after that point. When
no snapshot of the node's own covers it, a peer sends its applied state
(RaftPeer.FetchState): the state of committed entries only, the same on every
node up to its index (Raft's State Machine Safety), so any peer will do, the
leader or not. The node does this before it joins the quorum: in the meantime
it neither votes nor acknowledges, exactly as if it were down, so its own log,
which it keeps, can lose nothing another node counted on.

The simpler-looking way, starting with an empty log (hard state kept) so that
the leader sends an InstallSnapshot, is not safe: an entry committed by the
leader and this node alone would then be on the leader only, and should the
leader fail before the snapshot arrives, this node's vote (its empty log is
behind every candidate's) could elect the third node, which lacks the entry.

It runs before the node's event loop serves anything, with gRPC's blocking
API: peers are tried in turn until one has a state at least `min_index` recent
or the time allowed (initLimit x tickTime) runs out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import grpc

from quorum import errors
from quorum.codec import message_from_pb
from quorum.raft.types import MessageType, SnapshotMeta
from quorum.settings import NodeSettings
from quorum.snapshot_store import SnapshotStore, SnapshotWriter
from quorum.transport import GRPC_OPTIONS
from runtime import grpc_channels
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

# A peer that does not finish the HTTP/2 handshake in this time is skipped for this round: a stopped
# process (SIGSTOP, a frozen VM) accepts the TCP connection but would hold the whole wait.
PEER_CONNECT_TIMEOUT_S = 2.0
# Between rounds over every peer: a peer that is itself starting gets time to come up.
ROUND_PAUSE_S_MIN = 0.1
ROUND_PAUSE_S_MAX = 1.0
ROUNDS_MAX = 1000


class StateFetchError(Exception):
    """A peer's answer to FetchState is not a usable state (the message says why)."""


def fetch_peer_state(
    settings: NodeSettings,
    digest: str,
    min_index: int,
    snapshots: SnapshotStore,
    log: Any,
    members: Mapping[int, str] | None = None,
) -> tuple[SnapshotMeta, int]:
    """Write a peer's state, at least `min_index` recent, into `snapshots`; returns its meta and the peer's id.

    `members`: who to ask and where, the members of the configuration the node's stored log ends with
    (every member holds the committed state: observers and learners too); by default the start-up peers.
    Raises StartupError naming what each peer answered when none sent one in time."""
    timeout_s = settings.state_fetch_timeout_s
    deadline = time.monotonic() + timeout_s
    addresses = dict(settings.peers if members is None else members)
    peers = [p for p in sorted(addresses) if p != settings.node_id]
    problems: dict[int, str] = {}
    pause_s = ROUND_PAUSE_S_MIN
    log.info("state_fetch_started", min_index=min_index, peers=peers, timeout_s=timeout_s)
    for _ in range(ROUNDS_MAX):
        for peer in peers:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            try:
                return _fetch_from(settings, digest, addresses[peer], min_index, remaining_s, snapshots), peer
            except grpc.RpcError as exc:
                problems[peer] = f"{exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
            except StateFetchError as exc:
                problems[peer] = str(exc)
            log.warning("state_fetch_failed", peer=peer, error=problems[peer])
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            break
        time.sleep(min(pause_s, remaining_s))
        pause_s = min(2 * pause_s, ROUND_PAUSE_S_MAX)
    said = "; ".join(f"peer {p}: {problems[p]}" for p in sorted(problems)) or "no peer answered"
    raise errors.StartupError(
        f"refusing to start: the state machine must be rebuilt from a peer's state at index >= {min_index} "
        f"(no snapshot of this node's own covers its log), and none came within {timeout_s:.0f} s "
        f"(initLimit x tickTime): {said}"
    )


def _fetch_from(
    settings: NodeSettings, digest: str, address: str, min_index: int, timeout_s: float, snapshots: SnapshotStore
) -> SnapshotMeta:
    request = pb.FetchStateRequest(cluster_id=settings.cluster_id, peers_digest=digest, min_index=min_index)
    setattr(request, "from", settings.node_id)  # `from` is a Python keyword
    writer: SnapshotWriter | None = None
    with grpc_channels.sync_channel(address, settings.peer_tls, GRPC_OPTIONS) as channel:
        _connect(channel, min(PEER_CONNECT_TIMEOUT_S, timeout_s))
        try:
            for chunk in pb_grpc.RaftPeerStub(channel).FetchState(request, timeout=timeout_s):
                if writer is None:
                    writer = snapshots.create(_header(chunk, settings.cluster_id, min_index))
                if chunk.data:
                    writer.write(chunk.data)
                if chunk.last:
                    writer.commit()
                    return writer.meta
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
    if writer is not None:
        writer.abort()
    raise StateFetchError("the stream ended before its last chunk")


def _connect(channel: grpc.Channel, timeout_s: float) -> None:
    """Return once the channel is ready; raise StateFetchError when the first attempt fails (nothing
    listens: a down peer costs no wait) or when `timeout_s` passes (a stopped peer)."""
    seen: list[grpc.ChannelConnectivity] = []
    settled = threading.Event()
    final = (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE)

    def on_change(state: grpc.ChannelConnectivity) -> None:
        if state in final:
            seen.append(state)
            settled.set()

    channel.subscribe(on_change, try_to_connect=True)
    try:
        if not settled.wait(timeout_s):
            raise StateFetchError(f"no connection within {timeout_s:.1f} s")
        if seen[0] is not grpc.ChannelConnectivity.READY:
            raise StateFetchError("unreachable")
    finally:
        channel.unsubscribe(on_change)


def _header(chunk: pb.SnapshotChunk, cluster_id: str, min_index: int) -> SnapshotMeta:
    if chunk.cluster_id != cluster_id:
        raise StateFetchError(f"the peer belongs to cluster '{chunk.cluster_id}', not '{cluster_id}'")
    try:
        header = message_from_pb(chunk.message)
    except ValueError as exc:
        raise StateFetchError(f"first chunk: {exc}") from None
    meta = header.snapshot
    if header.type is not MessageType.SNAPSHOT or meta is None:
        raise StateFetchError("the first chunk carries no snapshot header")
    if meta.index < min_index:
        raise StateFetchError(f"the peer's state is at index {meta.index}, below {min_index}")
    return meta
