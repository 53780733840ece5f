"""What a quorum node refuses, and what it holds back, as a user of the SDK or of the raw gRPC stream sees it.

Three real node processes with small in-flight bounds (globalOutstandingLimit
and the per-session ones), so that a few sessions pipelining a few hundred
requests each go far over them: every request must still be answered, in its
session's order. A multi with an empty op fails whole with ZooKeeper's
MARSHALLINGERROR; a request over jute.maxbuffer is refused by the SDK before
it leaves, and a raw stream message over it (or bytes that are not a message)
ends that stream only, as ZooKeeper closes the connection. After a burst of
large requests the node hands its freed heap back once it has been quiet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from client.zk.aio import AsyncZkClient
from client.zk.client import _SharedLoop
from client.zk.exceptions import BadArgumentsError, MarshallingError, NoNodeError
from runtime.message_limits import ENVELOPE_BYTES_MAX, JUTE_MAX_BUFFER_BYTES_DEFAULT
from tests.quorum_harness import QuorumProcesses, poll_until, wait_for_leader
from zkraft_proto import zk_pb2

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

T = TypeVar("T")

GLOBAL_OUTSTANDING_LIMIT = 100
SESSION_OUTSTANDING_MAX = 40
PROPERTIES = {
    "quorum.state.machine": "zookeeper",
    "raft.tick.ms": "50",
    # 2 s: a snapshot runs on the node's event loop, and these tests make several of tens of MB.
    "raft.election.timeout.ticks": "40",
    "tickTime": "500",
    "globalOutstandingLimit": str(GLOBAL_OUTSTANDING_LIMIT),
    "session.outstanding.requests.max": str(SESSION_OUTSTANDING_MAX),
    "memory.release.quiet.ms": "200",
    # Snapshots by bytes, small enough for the burst below to take one.
    "snapshot.interval.bytes": str(8 << 20),
    "snapshot.trailing.bytes": str(1 << 20),
}
WAIT_S = 30.0
SESSION_MS = 10_000
PIPELINED_PER_SESSION = 400


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run on the SDK's shared loop (one gRPC asyncio loop per process)."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(WAIT_S + 30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("bounds"), n=3, properties=PROPERTIES) as procs:
        procs.start_all()
        run(wait_for_leader(procs.addresses, timeout_s=WAIT_S))
        yield procs
        procs.assert_alive()


async def _client(address: str) -> AsyncZkClient:
    zk = AsyncZkClient(address, timeout=WAIT_S, session_timeout_ms=SESSION_MS, randomize_hosts=False)
    await zk.start()
    return zk


async def _raw_session(address: str, messages: list[bytes]) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """A Session stream written raw: a connect, then `messages` as they are; its end status and what came back."""
    connect = zk_pb2.ClientMessage(connect=zk_pb2.ConnectRequest(timeout_ms=SESSION_MS)).SerializeToString()
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/zkraft.zk.ZooKeeper/Session", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )(iter([connect, *messages]), timeout=WAIT_S)
        received = [m async for m in _read_all(call)]
        return await call.code(), await call.details() or "", received


async def _read_all(call: Any) -> Any:
    try:
        async for message in call:
            yield message
    except grpc.aio.AioRpcError:
        return


def test_a_multi_with_an_empty_op_fails_whole_with_marshallingerror(cluster: QuorumProcesses) -> None:
    async def scenario() -> None:
        for address in cluster.addresses.values():  # the leader and both followers
            zk = await _client(address)
            try:
                path = f"/empty-op-{address.rsplit(':', 1)[1]}"
                multi = zk_pb2.Request(
                    multi=zk_pb2.MultiOp(ops=[zk_pb2.Op(create=zk_pb2.CreateOp(path=path)), zk_pb2.Op()])
                )
                with pytest.raises(MarshallingError, match="multi op 1 has no operation set"):
                    await zk._call(multi, path)
                with pytest.raises(NoNodeError):
                    await zk.get(path)  # nothing of the multi was applied
                assert await zk.create(path) == path  # and the session goes on
            finally:
                await zk.close()

    run(scenario())


def test_a_request_over_jute_maxbuffer_is_refused_by_the_sdk_and_the_session_goes_on(
    cluster: QuorumProcesses,
) -> None:
    async def scenario() -> None:
        zk = await _client(cluster.addresses[1])
        try:
            session = zk.client_id
            with pytest.raises(BadArgumentsError, match=r"exceeds jute.maxbuffer \(1048575 bytes\)"):
                await zk.create("/too-big", b"x" * JUTE_MAX_BUFFER_BYTES_DEFAULT)
            txn = zk.transaction()
            txn.create("/a", b"x" * 600_000)
            txn.create("/b", b"x" * 600_000)
            with pytest.raises(BadArgumentsError, match="jute.maxbuffer"):
                await txn.commit()
            # Just under the limit goes through, and in the same session: the connection was never dropped.
            near = JUTE_MAX_BUFFER_BYTES_DEFAULT - 1000
            assert await zk.create("/near-limit", b"x" * near) == "/near-limit"
            assert (await zk.get("/near-limit"))[1].dataLength == near
            assert zk.client_id == session
        finally:
            await zk.close()

    run(scenario())


def test_pipelined_large_requests_are_sent_in_messages_under_jute_maxbuffer(cluster: QuorumProcesses) -> None:
    """Many requests of 300 KB queued at once: the SDK cuts its batches so the server takes every message."""

    async def scenario() -> None:
        zk = await _client(cluster.addresses[2])
        try:
            paths = await asyncio.gather(*(zk.create(f"/batched-{k}", bytes([k]) * 300_000) for k in range(12)))
            assert paths == [f"/batched-{k}" for k in range(12)]
            for k in range(12):
                assert (await zk.get(f"/batched-{k}"))[0] == bytes([k]) * 300_000
        finally:
            await zk.close()

    run(scenario())


def test_a_burst_of_large_writes_through_a_follower_is_all_applied(tmp_path: Path) -> None:
    """90 MB of pipelined writes from four sessions on a follower, all applied. Before the bounds, the
    follower forwarded them in one message over the leader's gRPC receive limit (64 MiB), which ended
    the stream and failed them all; the node's default byte bounds (8 MiB a session, 32 MiB in all) now
    keep what it forwards under that and under the leader's bound on uncommitted data (64 MiB), and a
    larger forward batch would go in parts (zkemu.forward_stream). A cluster of its own, with default
    bounds and snapshots only by entries (a snapshot runs on the node's event loop: one of a large tree
    would hold it longer than the election timeout)."""
    properties = {**PROPERTIES, "snapshot.interval.bytes": str(1 << 30)}
    for key in (
        "globalOutstandingLimit",
        "session.outstanding.requests.max",
        "snapshot.trailing.bytes",
    ):
        del properties[key]
    with QuorumProcesses(tmp_path, n=3, properties=properties) as cluster:
        cluster.start_all()
        leader, _ = run(wait_for_leader(cluster.addresses, timeout_s=WAIT_S))
        follower = next(node for node in cluster.addresses if node != leader)
        run(_burst_through(cluster.addresses[follower]))
        cluster.assert_alive()


async def _burst_through(address: str) -> None:
    clients = [await _client(address) for _ in range(4)]
    try:
        value = b"f" * 900_000
        writes = [zk.create(f"/forwarded-{k}-{i}", value) for k, zk in enumerate(clients) for i in range(25)]
        assert len(await asyncio.gather(*writes)) == 100
        stat = await clients[0].exists("/forwarded-3-24")
        assert stat is not None and stat.dataLength == len(value)
    finally:
        for zk in clients:
            await zk.close()


def test_a_raw_stream_message_over_jute_maxbuffer_ends_only_that_stream(cluster: QuorumProcesses) -> None:
    over = b"x" * (JUTE_MAX_BUFFER_BYTES_DEFAULT + ENVELOPE_BYTES_MAX)
    big = zk_pb2.ClientMessage(
        request=zk_pb2.Request(xid=1, create=zk_pb2.CreateOp(path="/raw-big", data=over))
    ).SerializeToString()
    code, details, _ = run(_raw_session(cluster.addresses[1], [big]))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "exceeds jute.maxbuffer (1048575 bytes" in details

    garbage = b"\xff\xff\xff\xff\x0f"
    code, details, _ = run(_raw_session(cluster.addresses[1], [garbage]))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a ClientMessage" in details

    async def still_serving() -> None:
        zk = await _client(cluster.addresses[1])
        try:
            with pytest.raises(NoNodeError):
                await zk.get("/raw-big")
            assert await zk.create("/after-raw") == "/after-raw"
        finally:
            await zk.close()

    run(still_serving())
    cluster.assert_alive()


def test_far_more_pipelined_requests_than_the_outstanding_limits_all_complete_in_session_order(
    cluster: QuorumProcesses,
) -> None:
    sessions = 6  # two on each node: 2,400 requests against a limit of 100 in flight per node

    async def one_session(zk: AsyncZkClient, k: int) -> None:
        await zk.create(f"/fifo-{k}")
        calls = []
        for i in range(PIPELINED_PER_SESSION // 2):
            # A sequential create, then a read of it: FIFO means the read always sees the create.
            calls.append(zk.create(f"/fifo-{k}/n-", str(i).encode(), sequence=True))
            calls.append(zk.get(f"/fifo-{k}/n-{i:010d}"))
        results = await asyncio.gather(*calls)
        for i in range(PIPELINED_PER_SESSION // 2):
            assert results[2 * i] == f"/fifo-{k}/n-{i:010d}", f"session {k}: create {i} out of order"
            data, _ = results[2 * i + 1]
            assert data == str(i).encode(), f"session {k}: read {i} did not see its create"

    async def scenario() -> None:
        addresses = list(cluster.addresses.values())
        clients = [await _client(addresses[k % len(addresses)]) for k in range(sessions)]
        try:
            await asyncio.gather(*(one_session(zk, k) for k, zk in enumerate(clients)))
        finally:
            for zk in clients:
                await zk.close()

    run(scenario())
    throttled = [e for node in cluster.addresses for e in cluster.log_events(node, "requests_throttled")]
    assert throttled, "no node went over globalOutstandingLimit: the test did not exercise the bound"
    assert all(e["requests_max"] == GLOBAL_OUTSTANDING_LIMIT for e in throttled)


def test_a_node_hands_back_its_heap_after_a_burst_of_large_requests(cluster: QuorumProcesses) -> None:
    node = 3

    async def burst() -> None:
        zk = await _client(cluster.addresses[node])
        try:
            ops = [zk.create(f"/burst-{k}", b"b" * 500_000) for k in range(40)]  # 20 MB
            await asyncio.gather(*ops)
            await asyncio.gather(*(zk.delete(f"/burst-{k}") for k in range(40)))
        finally:
            await zk.close()

    before = len(cluster.log_events(node, "memory_released"))
    run(burst())

    async def released() -> bool:
        return len(cluster.log_events(node, "memory_released")) > before

    run(poll_until(released, WAIT_S, f"node {node} never logged memory_released after the burst"))


def test_a_burst_of_large_writes_is_snapshotted_and_leaves_the_log_by_bytes(cluster: QuorumProcesses) -> None:
    """The Raft log keeps entries in memory until a snapshot compacts it: 30 MB of writes (over
    snapshot.interval.bytes and over the size of the last snapshot, which the earlier tests' writes made
    at most 25 MB) bring a snapshot on every node, after which at most snapshot.trailing.bytes (1 MiB: two
    of these entries) stay behind it, not snapshot.trailing.entries (5,000)."""

    def snapshots(node: int) -> list[dict[str, Any]]:
        # A follower behind the leader's compaction point gets the leader's snapshot instead of taking one.
        return [e for e in cluster.log_events(node) if e.get("event") in ("snapshot_taken", "snapshot_installed")]

    before = {node: len(snapshots(node)) for node in cluster.addresses}

    async def burst() -> None:
        zk = await _client(cluster.addresses[1])
        try:
            await asyncio.gather(*(zk.create(f"/log-burst-{k}", b"l" * 500_000) for k in range(60)))
        finally:
            await zk.close()

    run(burst())

    async def snapshotted_everywhere() -> bool:
        return all(len(snapshots(node)) > n for node, n in before.items())

    run(poll_until(snapshotted_everywhere, WAIT_S, "not every node has a snapshot after 30 MB of writes"))
    taken = [e for node in cluster.addresses for e in snapshots(node)[before[node] :] if "compacted_to" in e]
    assert taken, "no node took a snapshot itself"
    for event in taken:
        # At most two of these entries, with whatever small ones (sessions, earlier tests' writes) fit beside
        # them; kept by entries alone, the whole burst (30 MB) would stay behind the snapshot.
        assert event["trailing_bytes"] <= 1 << 20, f"more than 1 MiB of log kept: {event}"


def test_transaction_ops_that_fit_are_not_refused(cluster: QuorumProcesses) -> None:
    """The SDK's own transaction builder never sends an empty op: a well-formed multi still works."""

    async def scenario() -> None:
        zk = await _client(cluster.addresses[1])
        try:
            txn = zk.transaction()
            txn.create("/txn-ok")
            txn.create("/txn-ok/child")
            assert await txn.commit() == ["/txn-ok", "/txn-ok/child"]
        finally:
            await zk.close()

    run(scenario())
