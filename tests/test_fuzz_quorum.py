"""Malformed and extreme requests against a live 3-node quorum: the nodes stay up, answer, and stay small.

Two hypothesis runs, each of a fixed number of examples derandomized (the
same inputs on every CI run) and cut off by a wall-clock budget:

* raw bytes as the payload or stream messages of every gRPC method of the
  node's services (found from the proto service descriptors, called with
  identity serializers, so nothing on the client side parses them);
* well-formed session streams with extreme values: every request kind with
  huge and negative numbers, paths that are long, deep, empty, special or
  invalid, data up to and over the 1 MiB znode limit, multis with empty ops
  or thousands of ops, requests with no operation, a second connect.

On a well-formed session stream the node must never answer SYSTEMERROR nor
end the stream with INTERNAL or UNKNOWN (a client must never see an internal
error), and must not stall past the call's deadline. Afterwards every node
process is alive, takes a normal create and get through the SDK, and its
resident memory (/proc/<pid>/status VmRSS) is under RSS_BOUND_MB.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import grpc
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from client.zk.aio import AsyncZkClient
from client.zk.client import _SharedLoop
from tests.helpers import resident_bytes
from tests.quorum_harness import QuorumProcesses, wait_for_leader
from zkraft_proto import quorum_pb2, zk_pb2

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

T = TypeVar("T")

PROPERTIES = {"quorum.state.machine": "zookeeper", "tickTime": "500"}
WAIT_S = 30.0
# A call the node has not finished within this has stalled (the busiest example takes well under a second).
CALL_TIMEOUT_S = 20.0
# Each run stops taking new examples after this many seconds; together about 20 s of fuzzing (CI time;
# the seeds are fixed, so every run repeats the same first examples: a longer budget only adds more).
RAW_BUDGET_S = 8.0
STRUCTURED_BUDGET_S = 12.0
RAW_EXAMPLES = 600
STRUCTURED_EXAMPLES = 600
# A node starts at ~50 MB; the fuzz writes a few dozen znodes of up to 1 MiB, which the node keeps in
# its tree and in its Raft log until the next snapshot.
RSS_BOUND_MB = 300
SYSTEMERROR = -1
# What this process's gRPC reports when it writes to a call the node has already ended (the node ends a
# stream at its first bad message; the rest were on their way): a client-side status, not the node's.
CLIENT_WRITE_AFTER_END = "Internal error from Core"
# Node log events that mean a client got an internal error, or the node's loop saw an unhandled one.
INTERNAL_ERROR_EVENTS = ("session_stream_error", "request_failed", "event_loop_error")
NEVER_FOR_A_WELL_FORMED_STREAM = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED)
INT32 = st.one_of(st.sampled_from([0, -1, 1, -(2**31), 2**31 - 1]), st.integers(-(2**31), 2**31 - 1))
INT64 = st.one_of(st.sampled_from([0, -1, 1, -(2**63), 2**63 - 1]), st.integers(-(2**63), 2**63 - 1))


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run on the SDK's shared loop (one gRPC asyncio loop per process)."""
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(CALL_TIMEOUT_S + 30)


def _methods() -> list[tuple[str, bool, bool]]:
    """(full method path, client streaming, server streaming) of every service a quorum node serves."""
    found = []
    for file in (zk_pb2.DESCRIPTOR, quorum_pb2.DESCRIPTOR):
        for service in file.services_by_name.values():
            for method in service.methods:
                found.append((f"/{service.full_name}/{method.name}", method.client_streaming, method.server_streaming))
    return found


METHODS = _methods()
SESSION_METHOD = "/zkraft.zk.ZooKeeper/Session"


class Channels:
    """One channel per node for the whole module (a channel per example would dominate the run)."""

    def __init__(self, addresses: dict[int, str]) -> None:
        self.addresses = addresses
        self._channels: dict[int, grpc.aio.Channel] = {}

    def get(self, node: int) -> grpc.aio.Channel:
        if node not in self._channels:
            options = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
            self._channels[node] = grpc.aio.insecure_channel(self.addresses[node], options=options)
        return self._channels[node]

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(grace=None)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[QuorumProcesses, Channels]]:
    with QuorumProcesses(tmp_path_factory.mktemp("fuzz"), n=3, properties=PROPERTIES) as procs:
        procs.start_all()
        run(wait_for_leader(procs.addresses, timeout_s=WAIT_S))
        channels = Channels(procs.addresses)
        try:
            yield procs, channels
        finally:
            run(channels.close())


async def call_raw(
    channels: Channels, node: int, method: str, streams: tuple[bool, bool], payloads: list[bytes]
) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """Call `method` with `payloads` as they are; its status, its details and the raw messages that came back."""
    channel = channels.get(node)  # here, on the SDK's loop: a gRPC channel belongs to the loop that made it
    client_streaming, server_streaming = streams
    ident = bytes
    replies: list[bytes] = []
    try:
        if client_streaming:
            # Written one by one, as a client would: the node may end the call before it has read them all.
            if server_streaming:
                call = channel.stream_stream(method, ident, ident)(timeout=CALL_TIMEOUT_S)
            else:
                call = channel.stream_unary(method, ident, ident)(timeout=CALL_TIMEOUT_S)
            await _write_all(call, payloads)
            if server_streaming:
                async for reply in call:
                    replies.append(reply)
            else:
                replies.append(await call)
            return await call.code(), await call.details() or "", replies
        if server_streaming:
            async for reply in channel.unary_stream(method, ident, ident)(payloads[0], timeout=CALL_TIMEOUT_S):
                replies.append(reply)
        else:
            replies.append(await channel.unary_unary(method, ident, ident)(payloads[0], timeout=CALL_TIMEOUT_S))
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or "", replies
    return grpc.StatusCode.OK, "", replies


async def _write_all(call: Any, payloads: list[bytes]) -> None:
    for payload in payloads:
        if call.done():
            return
        try:
            await call.write(payload)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            return  # the node ended the call: its status says why
    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
        await call.done_writing()


# ---------------------------------------------------------------- strategies

PATHS = st.one_of(
    st.sampled_from(
        [
            "/",
            "",
            "//",
            "/a/",
            "/.",
            "/..",
            "/a/../b",
            "/\x00",
            "/a\x00b",
            "/zookeeper",
            "/zookeeper/config",
            "/zookeeper/quota",
            "/\u007f",
            "/\ufff0",
            "a",
            "/fuzz",
        ]
    ),  # fmt: skip
    st.text(max_size=30).map(lambda t: "/" + t),
    st.text(max_size=30),
    st.integers(1, 300).map(lambda n: "/d" * n),  # deep
    st.sampled_from([200, 509, 512, 4096, 100_000]).map(lambda n: "/" + "p" * n),  # long
)
DATA = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([(1 << 20) - 4096, 1 << 20, (1 << 20) + 1]).map(lambda n: b"d" * n),
)


def _op() -> st.SearchStrategy[zk_pb2.Op]:
    return st.one_of(
        st.just(zk_pb2.Op()),  # no kind set
        st.builds(
            lambda p, d, m, mp: zk_pb2.Op(create=zk_pb2.CreateOp(path=p, data=d, mode=m, make_parents=mp)),
            PATHS,
            DATA,
            INT32,
            st.booleans(),
        ),  # fmt: skip
        st.builds(lambda p, v: zk_pb2.Op(delete=zk_pb2.DeleteOp(path=p, version=v)), PATHS, INT32),
        st.builds(lambda p, d, v: zk_pb2.Op(set_data=zk_pb2.SetDataOp(path=p, data=d, version=v)), PATHS, DATA, INT32),
        st.builds(lambda p, v: zk_pb2.Op(check=zk_pb2.CheckOp(path=p, version=v)), PATHS, INT32),
    )


MULTIS = st.one_of(
    st.lists(_op(), max_size=8),
    st.integers(0, 20_000).map(lambda n: [zk_pb2.Op(check=zk_pb2.CheckOp(path="/", version=-1))] * n),
    st.integers(0, 2_000).map(lambda n: [zk_pb2.Op(create=zk_pb2.CreateOp(path="/fuzz-many", mode=2))] * n),
)


def _request_body() -> st.SearchStrategy[dict[str, Any]]:
    paths = st.lists(PATHS, max_size=5)
    return st.one_of(
        st.just({}),  # no operation set
        _op().map(lambda op: {op.WhichOneof("op"): getattr(op, op.WhichOneof("op"))} if op.WhichOneof("op") else {}),
        MULTIS.map(lambda ops: {"multi": zk_pb2.MultiOp(ops=ops)}),
        st.builds(lambda p, w: {"get_data": zk_pb2.GetDataRequest(path=p, watch=w)}, PATHS, st.booleans()),
        st.builds(lambda p, w: {"exists": zk_pb2.ExistsRequest(path=p, watch=w)}, PATHS, st.booleans()),
        st.builds(
            lambda p, w, s: {"get_children": zk_pb2.GetChildrenRequest(path=p, watch=w, include_stat=s)},
            PATHS,
            st.booleans(),
            st.booleans(),
        ),  # fmt: skip
        st.builds(lambda p: {"sync": zk_pb2.SyncRequest(path=p)}, PATHS),
        st.builds(lambda p: {"get_ephemerals": zk_pb2.GetEphemeralsRequest(prefix_path=p)}, PATHS),
        st.builds(lambda p: {"get_all_children_number": zk_pb2.GetAllChildrenNumberRequest(path=p)}, PATHS),
        st.builds(lambda p, m: {"add_watch": zk_pb2.AddWatchRequest(path=p, mode=m)}, PATHS, INT32),
        st.builds(lambda p, t: {"remove_watches": zk_pb2.RemoveWatchesRequest(path=p, watcher_type=t)}, PATHS, INT32),
        st.builds(
            lambda z, a, b, c, d, e: {
                "set_watches": zk_pb2.SetWatchesRequest(
                    relative_zxid=z,
                    data_watches=a,
                    exist_watches=b,
                    child_watches=c,
                    persistent_watches=d,
                    persistent_recursive_watches=e,
                )
            },
            INT64,
            paths,
            paths,
            paths,
            paths,
            paths,
        ),  # fmt: skip
        st.just({"ping": zk_pb2.PingRequest()}),
        st.just({"close": zk_pb2.CloseRequest()}),
    )


REQUESTS = st.builds(lambda xid, body: zk_pb2.Request(xid=xid, **body), INT64, _request_body())
CONNECTS = st.one_of(
    st.builds(lambda t, lin: zk_pb2.ConnectRequest(timeout_ms=t, linearizable_reads=lin), INT32, st.booleans()),
    st.builds(
        lambda sid, pw, t, z: zk_pb2.ConnectRequest(session_id=sid, password=pw, timeout_ms=t, last_zxid_seen=z),
        INT64,
        st.binary(max_size=32),
        INT32,
        INT64,
    ),  # fmt: skip
)
STREAM_MESSAGES = st.lists(
    st.one_of(
        REQUESTS.map(lambda r: zk_pb2.ClientMessage(request=r)),
        st.lists(REQUESTS, max_size=20).map(lambda rs: zk_pb2.ClientMessage(batch=zk_pb2.RequestBatch(requests=rs))),
        CONNECTS.map(lambda c: zk_pb2.ClientMessage(connect=c)),  # a second connect
        st.just(zk_pb2.ClientMessage()),  # no kind set
    ),
    max_size=6,
)
RAW_PAYLOADS = st.lists(
    st.one_of(st.binary(max_size=256), st.sampled_from([1 << 20, (1 << 20) + 8192]).map(lambda n: b"\x0a" * n)),
    min_size=1,
    max_size=4,
)


class Budget:
    """The wall-clock cut-off of one hypothesis run: examples after it do nothing."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started_s: float | None = None
        self.examples = 0

    def spent(self) -> bool:
        now_s = time.monotonic()
        if self.started_s is None:
            self.started_s = now_s
        if now_s - self.started_s > self.seconds:
            return True
        self.examples += 1
        return False


FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------- the runs (the module's tests run in order)

RAW_BUDGET = Budget(RAW_BUDGET_S)
RAW_CODES: collections.Counter[tuple[str, str]] = collections.Counter()  # (method, status): printed at the end
STRUCTURED_BUDGET = Budget(STRUCTURED_BUDGET_S)


@settings(FUZZ_SETTINGS, max_examples=RAW_EXAMPLES)
@given(node=st.integers(1, 3), method=st.sampled_from(METHODS), payloads=RAW_PAYLOADS)
def test_random_bytes_on_every_method(
    cluster: tuple[QuorumProcesses, Channels], node: int, method: tuple[str, bool, bool], payloads: list[bytes]
) -> None:
    if RAW_BUDGET.spent():
        return
    _, channels = cluster
    name, client_streaming, server_streaming = method
    code, details, _ = run(call_raw(channels, node, name, (client_streaming, server_streaming), payloads))
    RAW_CODES[(name.rsplit("/", 1)[1], code.name)] += 1
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{name} on node {node} stalled: {details}"
    if name == SESSION_METHOD and details != CLIENT_WRITE_AFTER_END:
        # The client-facing stream reads its own messages (zkemu.session_intake): never an internal error.
        assert code not in NEVER_FOR_A_WELL_FORMED_STREAM, f"node {node}: Session ended with {code}: {details}"


def _stream_of(*requests: zk_pb2.Request) -> list[zk_pb2.ClientMessage]:
    return [zk_pb2.ClientMessage(request=r) for r in requests]


NEW_SESSION = zk_pb2.ConnectRequest(timeout_ms=4000)
CHECK_ROOT = zk_pb2.Op(check=zk_pb2.CheckOp(path="/", version=-1))


# The cases known to have broken a node, first on every run; hypothesis draws the rest.
@example(
    node=1,
    connect=NEW_SESSION,
    messages=_stream_of(
        zk_pb2.Request(xid=1, multi=zk_pb2.MultiOp(ops=[zk_pb2.Op(create=zk_pb2.CreateOp(path="/e")), zk_pb2.Op()]))
    ),
)
@example(
    node=2,
    connect=NEW_SESSION,
    messages=_stream_of(zk_pb2.Request(xid=1, multi=zk_pb2.MultiOp(ops=[zk_pb2.Op()])), zk_pb2.Request(xid=2)),
)
@example(
    node=3,
    connect=NEW_SESSION,
    messages=_stream_of(zk_pb2.Request(xid=1, multi=zk_pb2.MultiOp(ops=[CHECK_ROOT] * 50_000))),
)
@example(
    node=1,
    connect=NEW_SESSION,
    messages=_stream_of(
        zk_pb2.Request(xid=1, create=zk_pb2.CreateOp(path="/big", data=b"d" * ((1 << 20) + 1), mode=-(2**31))),
        zk_pb2.Request(xid=2, set_data=zk_pb2.SetDataOp(path="/", data=b"d" * (1 << 20), version=2**31 - 1)),
    ),
)
@example(
    node=2,
    connect=NEW_SESSION,
    messages=_stream_of(
        zk_pb2.Request(xid=-1, create=zk_pb2.CreateOp(path="/d" * 255, make_parents=True, mode=3)),
        zk_pb2.Request(
            xid=2**63 - 1, get_all_children_number=zk_pb2.GetAllChildrenNumberRequest(path="/" + "p" * 100_000)
        ),
        zk_pb2.Request(
            set_watches=zk_pb2.SetWatchesRequest(relative_zxid=-(2**63), data_watches=["/" + "w" * 600] * 500)
        ),
    ),
)
@example(node=3, connect=zk_pb2.ConnectRequest(session_id=-1, last_zxid_seen=2**63 - 1, timeout_ms=-1), messages=[])
@settings(FUZZ_SETTINGS, max_examples=STRUCTURED_EXAMPLES)
@given(node=st.integers(1, 3), connect=CONNECTS, messages=STREAM_MESSAGES)
def test_extreme_session_streams(
    cluster: tuple[QuorumProcesses, Channels],
    node: int,
    connect: zk_pb2.ConnectRequest,
    messages: list[zk_pb2.ClientMessage],
) -> None:
    if STRUCTURED_BUDGET.spent():
        return
    _, channels = cluster
    stream = [zk_pb2.ClientMessage(connect=connect), *messages]
    payloads = [m.SerializeToString() for m in stream]
    code, details, replies = run(call_raw(channels, node, SESSION_METHOD, (True, True), payloads))
    if details != CLIENT_WRITE_AFTER_END:
        assert code not in NEVER_FOR_A_WELL_FORMED_STREAM, f"node {node} ended a session stream with {code}: {details}"
    for raw in replies:
        reply = zk_pb2.ServerMessage.FromString(raw)
        answers = reply.batch.messages if reply.WhichOneof("kind") == "batch" else [reply]
        for answer in answers:
            if answer.WhichOneof("kind") == "response":
                assert answer.response.err != SYSTEMERROR, f"node {node}: {answer.response.error_message}"


def test_every_node_is_alive_serves_and_stays_small_after_the_fuzz(cluster: tuple[QuorumProcesses, Channels]) -> None:
    procs, _ = cluster
    procs.assert_alive()
    for node in procs.addresses:
        internal = [e for event in INTERNAL_ERROR_EVENTS for e in procs.log_events(node, event)]
        assert not internal, f"node {node} answered with an internal error: {internal[:3]}"
    assert RAW_BUDGET.examples > 0 and STRUCTURED_BUDGET.examples > 0, "the fuzz runs took no example"
    run(wait_for_leader(procs.addresses, timeout_s=WAIT_S))

    async def serves(node: int) -> None:
        zk = AsyncZkClient(procs.addresses[node], timeout=WAIT_S, randomize_hosts=False, ensemble_tracker=False)
        await zk.start()
        try:
            path = await zk.create(f"/after-fuzz-{node}", b"normal", makepath=True)
            assert (await zk.get(path))[0] == b"normal"
        finally:
            await zk.close()

    for node in procs.addresses:
        run(serves(node))
    rss_mb = {node: resident_bytes(_pid(procs, node)) >> 20 for node in procs.addresses}
    print(f"fuzz examples: raw {RAW_BUDGET.examples}, structured {STRUCTURED_BUDGET.examples}; VmRSS MB {rss_mb}")
    print(f"raw call outcomes (method, status): {sorted(RAW_CODES.items())}")
    assert max(rss_mb.values()) < RSS_BOUND_MB, f"VmRSS after the fuzz {rss_mb} MB (bound {RSS_BOUND_MB} MB)"


def _pid(procs: QuorumProcesses, node: int) -> int:
    pid = procs.pid(node)
    assert pid is not None, f"node {node} has no process"
    return pid
