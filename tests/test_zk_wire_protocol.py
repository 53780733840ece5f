"""The ZooKeeper wire protocol's edges, byte by byte, against a real three-node quorum's client ports:
what kazoo never sends (SetWatches/SetWatches2 catch-up, addWatch, checkWatches, removeWatches,
multiRead, reconfig, sasl, a ConnectRequest without readOnly), each reply's record as ZooKeeper 3.9
shapes it, and malformed input (oversized or negative frames, unknown opcodes, truncated records,
lying lengths, garbage before the handshake): the node answers as ZooKeeper does and keeps serving
its other clients.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.helpers import resident_bytes, wait_until
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader
from tests.zk_wire_client import (
    WireClient,
    boolean,
    buffer,
    connect_request,
    frame,
    int32,
    int64,
    jute,
    strings,
    ustring,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LEADER_TIMEOUT_S = 20.0
JUTE_MAX_BUFFER_BYTES = 256 << 10  # small, so that an oversized frame is cheap to send
SESSIONLESS_TIMEOUT_MS = 1000
MAX_CLIENT_CONNECTIONS = 12
# getData replies this large count as bytes in flight (zkemu.service.LARGE_REPLY_BYTES is 64 KiB).
LARGE_NODE_BYTES = 100 << 10
SLOW_CLIENT_REQUESTS = 4000
FUZZ_CONNECTIONS = 20
FUZZ_FRAMES = 50
# What a client that never reads may make a node hold: the session's bytes in flight (8 MiB by default)
# and the socket buffers, far below the 4000 x 100 KiB = 390 MiB it asks for.
SLOW_CLIENT_GROWTH_BYTES_MAX = 64 << 20
NONODE = -101
NOWATCHER = -121
MARSHALLINGERROR = -5
UNIMPLEMENTED = -6
RECONFIGDISABLED = -123
NODE_CREATED, NODE_DELETED, NODE_DATA_CHANGED, NODE_CHILDREN_CHANGED = 1, 2, 3, 4
SYNC_CONNECTED = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    properties = {
        **FAST_ZK_PROPERTIES,
        "jute.maxbuffer": str(JUTE_MAX_BUFFER_BYTES),
        "zookeeper.nio.sessionlessCnxnTimeout": str(SESSIONLESS_TIMEOUT_MS),
        "maxClientCnxns": str(MAX_CLIENT_CONNECTIONS),
        "4lw.commands.whitelist": "ruok",  # ZooKeeper's default enables srvr alone
    }
    with QuorumProcesses(tmp_path_factory.mktemp("wire"), n=3, properties=properties) as processes:
        processes.start_all()
        asyncio.run(wait_for_leader(processes.addresses, timeout_s=LEADER_TIMEOUT_S))
        asyncio.run(processes.wait_client_ports(timeout_s=LEADER_TIMEOUT_S))
        yield processes


@pytest.fixture(scope="module")
def writer(cluster: QuorumProcesses) -> Iterator[KazooClient]:
    """A kazoo session on node 1 that makes the changes the raw sessions watch."""
    zk = KazooClient(hosts=cluster.zk_address(1), timeout=4.0)
    zk.start(timeout=30)
    yield zk
    zk.stop()
    zk.close()


def create_record(path: str, data: bytes = b"", flags: int = 0) -> bytes:
    world_anyone = int32(1) + int32(31) + ustring("world") + ustring("anyone")
    return ustring(path) + buffer(data) + world_anyone + int32(flags)


def multi_read_record(ops: list[tuple[int, str]]) -> bytes:
    parts = [struct.pack(">i?i", opcode, False, -1) + ustring(path) + boolean(False) for opcode, path in ops]
    return b"".join(parts) + struct.pack(">i?i", -1, True, -1)


def assert_still_serving(cluster: QuorumProcesses, node_id: int) -> None:
    with WireClient.connect(cluster.zk_address(node_id)) as wire:
        assert wire.session_id != 0
        reply = wire.call(jute.OP_EXISTS, ustring("/") + boolean(False))
        assert reply.err == 0


def test_connect_with_and_without_the_read_only_byte(cluster: QuorumProcesses) -> None:
    for read_only, size in ((True, 37), (False, 36)):
        with WireClient.open(cluster.zk_address(2)) as wire:
            wire.sock.sendall(frame(connect_request(read_only=read_only)))
            payload = wire.read_frame()
            assert len(payload) == size  # protocolVersion, timeOut, sessionId, passwd[16][, readOnly]
            _, timeout_ms, session_id = struct.unpack_from(">iiq", payload, 0)
            assert timeout_ms > 0 and session_id != 0


def test_wrong_password_is_an_expired_session(cluster: QuorumProcesses) -> None:
    with WireClient.connect(cluster.zk_address(1)) as owner:
        with WireClient.connect(cluster.zk_address(3), session_id=owner.session_id, password=bytes(16)) as wrong:
            assert (wrong.session_id, wrong.timeout_ms, wrong.password) == (0, 0, bytes(16))
        with WireClient.connect(cluster.zk_address(3), session_id=owner.session_id, password=owner.password) as moved:
            assert moved.session_id == owner.session_id and moved.timeout_ms > 0


def test_reply_records_follow_the_opcode(cluster: QuorumProcesses, writer: KazooClient) -> None:
    with WireClient.connect(cluster.zk_address(2)) as wire:
        created = wire.call(jute.OP_CREATE, create_record("/shape", b"d"))
        assert created.err == 0 and created.string() == "/shape" and created.pos == len(created.body)
        created2 = wire.call(jute.OP_CREATE2, create_record("/shape/c2", b"xy"))
        assert created2.string() == "/shape/c2"
        stat = created2.stat()
        assert stat[0] == created2.zxid and stat[8] == 2  # czxid is the reply's zxid; dataLength 2
        missing = wire.call(jute.OP_EXISTS, ustring("/shape/none") + boolean(False))
        assert (missing.err, missing.body) == (NONODE, b"")  # exists on a missing node: no record
        children = wire.call(jute.OP_GET_CHILDREN, ustring("/shape") + boolean(False))
        assert children.strings() == ["c2"] and children.pos == len(children.body)
        children2 = wire.call(jute.OP_GET_CHILDREN2, ustring("/shape") + boolean(False))
        assert children2.strings() == ["c2"] and children2.stat()[9] == 1  # numChildren
        data = wire.call(jute.OP_GET_DATA, ustring("/shape") + boolean(False))
        assert data.bytes() == b"d" and len(data.body) == 4 + 1 + 68
        ping = wire.call(jute.OP_PING, xid=-2)
        assert (ping.xid, ping.err, ping.body) == (-2, 0, b"")
        assert ping.zxid >= created2.zxid  # every ReplyHeader carries the node's applied zxid
        wire.call(jute.OP_DELETE, ustring("/shape/c2") + int32(-1))
        gone = wire.call(jute.OP_GET_DATA, ustring("/shape/c2") + boolean(False))
        assert (gone.err, gone.body) == (NONODE, b"")
        closed = wire.call(jute.OP_CLOSE_SESSION)
        assert closed.err == 0
        assert wire.closed_by_server()


def test_notifications_carry_the_change_zxid(cluster: QuorumProcesses, writer: KazooClient) -> None:
    writer.create("/notify", b"0")
    with WireClient.connect(cluster.zk_address(3)) as wire:
        wire.call(jute.OP_GET_DATA, ustring("/notify") + boolean(True))
        stat = writer.set("/notify", b"1")
        event = wire.event()
        assert event.zxid == stat.mzxid
        assert event.event() == (NODE_DATA_CHANGED, SYNC_CONNECTED, "/notify")


def test_set_watches_catch_up_from_a_relative_zxid(cluster: QuorumProcesses, writer: KazooClient) -> None:
    for path in ("/sw", "/sw/data", "/sw/gone", "/sw/same", "/sw/kids"):
        writer.create(path, b"")
    relative_zxid = writer.exists("/sw/kids").mzxid
    writer.set("/sw/data", b"changed")
    writer.delete("/sw/gone")
    writer.create("/sw/new")
    writer.create("/sw/kids/k")
    with WireClient.connect(cluster.zk_address(2), last_zxid=relative_zxid) as wire:
        record = (
            int64(relative_zxid)
            + strings(["/sw/data", "/sw/gone", "/sw/same"])
            + strings(["/sw/new", "/sw/absent"])
            + strings(["/sw/kids"])
        )
        reply = wire.call(jute.OP_SET_WATCHES, record, xid=-8)
        assert (reply.xid, reply.err, reply.body) == (-8, 0, b"")
        caught_up = sorted(event.event() for event in wire.events)
        assert caught_up == sorted(
            [
                (NODE_DATA_CHANGED, SYNC_CONNECTED, "/sw/data"),
                (NODE_DELETED, SYNC_CONNECTED, "/sw/gone"),
                (NODE_CREATED, SYNC_CONNECTED, "/sw/new"),
                (NODE_CHILDREN_CHANGED, SYNC_CONNECTED, "/sw/kids"),
            ]
        )
        assert {event.zxid for event in wire.events} == {-1}  # catch-up events carry no zxid
        wire.events.clear()
        # The watches with nothing to catch up on are armed again.
        writer.set("/sw/same", b"later")
        assert wire.event().event() == (NODE_DATA_CHANGED, SYNC_CONNECTED, "/sw/same")
        writer.create("/sw/absent")
        assert wire.event().event() == (NODE_CREATED, SYNC_CONNECTED, "/sw/absent")


def test_set_watches2_rearms_persistent_watches(cluster: QuorumProcesses, writer: KazooClient) -> None:
    writer.create("/sw2", b"")
    with WireClient.connect(cluster.zk_address(1)) as wire:
        record = int64(0) + strings([]) + strings([]) + strings([]) + strings(["/sw2"]) + strings(["/sw2r"])
        assert wire.call(jute.OP_SET_WATCHES2, record, xid=-8).err == 0
        assert wire.call(jute.OP_CHECK_WATCHES, ustring("/sw2") + int32(4)).err == 0
        assert wire.call(jute.OP_CHECK_WATCHES, ustring("/sw2r") + int32(5)).err == 0
        for k in range(2):  # persistent: it fires every time
            writer.set("/sw2", str(k).encode())
            assert wire.event().event() == (NODE_DATA_CHANGED, SYNC_CONNECTED, "/sw2")


def test_add_check_and_remove_watches(cluster: QuorumProcesses, writer: KazooClient) -> None:
    writer.create("/aw", b"")
    with WireClient.connect(cluster.zk_address(3)) as wire:
        added = wire.call(jute.OP_ADD_WATCH, ustring("/aw") + int32(1))  # PERSISTENT_RECURSIVE
        assert (added.err, added.body) == (0, int32(0))  # ErrorResponse{0}
        assert wire.call(jute.OP_CHECK_WATCHES, ustring("/aw") + int32(5)).err == 0
        assert wire.call(jute.OP_CHECK_WATCHES, ustring("/aw") + int32(2)).err == NOWATCHER
        writer.create("/aw/x/y", makepath=True)
        events = [wire.event().event(), wire.event().event()]
        assert events == [(NODE_CREATED, SYNC_CONNECTED, "/aw/x"), (NODE_CREATED, SYNC_CONNECTED, "/aw/x/y")]
        assert wire.call(jute.OP_REMOVE_WATCHES, ustring("/aw") + int32(5)).err == 0
        assert wire.call(jute.OP_CHECK_WATCHES, ustring("/aw") + int32(5)).err == NOWATCHER
        assert wire.call(jute.OP_REMOVE_WATCHES, ustring("/aw") + int32(5)).err == NOWATCHER


def test_multi_read(cluster: QuorumProcesses, writer: KazooClient) -> None:
    writer.create("/mr", b"top")
    writer.create("/mr/a", b"")
    with WireClient.connect(cluster.zk_address(2)) as wire:
        ops = [(jute.OP_GET_DATA, "/mr"), (jute.OP_GET_CHILDREN, "/mr"), (jute.OP_GET_DATA, "/mr/none")]
        reply = wire.call(jute.OP_MULTI_READ, multi_read_record(ops))
        assert reply.err == 0
        results = []
        for _ in range(4):
            op_type, done, err = struct.unpack_from(">i?i", reply.body, reply.pos)
            reply.pos += 9
            if done:
                break
            if op_type == jute.OP_GET_DATA:
                results.append((op_type, err, reply.bytes(), reply.stat()[8]))
            elif op_type == jute.OP_GET_CHILDREN:
                results.append((op_type, err, reply.strings()))
            else:
                results.append((op_type, err, reply.int()))
        assert results == [
            (jute.OP_GET_DATA, 0, b"top", 3),
            (jute.OP_GET_CHILDREN, 0, ["a"]),
            (-1, NONODE, NONODE),
        ]
        assert reply.pos == len(reply.body)


def test_reconfig_while_disabled_and_sasl_without_logins_answer_as_zookeeper(cluster: QuorumProcesses) -> None:
    with WireClient.connect(cluster.zk_address(1)) as wire:
        # reconfigEnabled is off (ZooKeeper's default): refused whatever it asks, with empty or null strings.
        reconfig = wire.call(jute.OP_RECONFIG, ustring("") + ustring("") + ustring("") + int64(-1))
        assert (reconfig.err, reconfig.body) == (RECONFIGDISABLED, b"")
        reconfig = wire.call(jute.OP_RECONFIG, int32(-1) + ustring("3") + int32(-1) + int64(-1))
        assert (reconfig.err, reconfig.body) == (RECONFIGDISABLED, b"")
        sasl = wire.call(jute.OP_SASL, buffer(b"token"))
        assert (sasl.err, sasl.zxid, sasl.body) == (0, 0, int32(-1))  # SetSASLResponse{null}
        assert wire.call(jute.OP_PING, xid=-2).err == 0  # the session goes on


# ---- malformed input: the node answers as ZooKeeper does and keeps serving


def test_four_letter_word_before_connect(cluster: QuorumProcesses) -> None:
    with WireClient.open(cluster.zk_address(1)) as wire:
        wire.sock.sendall(b"ruok")
        assert wire.read_exactly(4) == b"imok"
        assert wire.closed_by_server()


@pytest.mark.parametrize(
    "first_bytes",
    [
        int32(JUTE_MAX_BUFFER_BYTES + 1) + b"x" * 64,  # over jute.maxbuffer
        int32(-5),  # negative length
        b"\xff\xfe garbage that is no ConnectRequest",  # garbage before connect
        frame(b"\x00\x00\x00\x00short"),  # a ConnectRequest cut short
    ],
    ids=["oversized", "negative", "garbage", "truncated-connect"],
)
def test_bad_first_frame_closes_without_reply(cluster: QuorumProcesses, first_bytes: bytes) -> None:
    with WireClient.open(cluster.zk_address(2)) as wire:
        wire.sock.sendall(first_bytes)
        wire.sock.shutdown(socket.SHUT_WR)
        assert wire.closed_by_server()
    assert_still_serving(cluster, 2)


@pytest.mark.parametrize("length", [JUTE_MAX_BUFFER_BYTES + 1, -1])
def test_bad_frame_length_in_a_session_closes_it(cluster: QuorumProcesses, length: int) -> None:
    with WireClient.connect(cluster.zk_address(3)) as wire:
        wire.sock.sendall(int32(length) + b"\x00" * 32)
        assert wire.closed_by_server()
    assert_still_serving(cluster, 3)


def test_unknown_opcode_is_unimplemented_then_closed(cluster: QuorumProcesses) -> None:
    with WireClient.connect(cluster.zk_address(1)) as wire:
        reply = wire.call(999, b"whatever")
        assert reply.err == UNIMPLEMENTED
        assert wire.closed_by_server()
    assert_still_serving(cluster, 1)


@pytest.mark.parametrize(
    "opcode, record",
    [
        (jute.OP_GET_DATA, int32(100) + b"/ab"),  # a string that says 100 bytes, the frame has 3
        (jute.OP_CREATE, ustring("/x") + int32(1 << 30)),  # a data buffer longer than the frame
        (jute.OP_SET_WATCHES, int64(0) + int32(1 << 28)),  # a vector count the frame cannot hold
        (jute.OP_MULTI, struct.pack(">i?i", 1, False, -1) + ustring("/m")),  # a multi cut short
        (jute.OP_GET_CHILDREN, b""),  # no record at all
        (jute.OP_CREATE, ustring("/bad-utf8") + buffer(b"") + int32(0) + b"\xff\xff\xff"),
    ],
    ids=["lying-string", "lying-buffer", "lying-vector", "truncated-multi", "empty", "truncated-create"],
)
def test_unparsable_record_is_marshalling_error_and_the_session_goes_on(
    cluster: QuorumProcesses, opcode: int, record: bytes
) -> None:
    with WireClient.connect(cluster.zk_address(2)) as wire:
        reply = wire.call(opcode, record)
        assert (reply.err, reply.body) == (MARSHALLINGERROR, b"")
        assert wire.call(jute.OP_EXISTS, ustring("/") + boolean(False)).err == 0


def test_pipelined_requests_in_one_write_are_answered_in_order(cluster: QuorumProcesses) -> None:
    with WireClient.connect(cluster.zk_address(3)) as wire:
        burst = b"".join(
            frame(struct.pack(">ii", xid, jute.OP_CREATE) + create_record(f"/burst-{xid}")) for xid in range(1, 201)
        )
        wire.sock.sendall(burst + frame(struct.pack(">ii", 201, jute.OP_GET_CHILDREN) + ustring("/") + boolean(False)))
        replies = [wire.reply() for _ in range(201)]
        assert [r.xid for r in replies] == list(range(1, 202))
        assert all(r.err == 0 for r in replies)
        assert {f"burst-{xid}" for xid in range(1, 201)} <= set(replies[-1].strings())


def test_a_connection_without_a_handshake_is_closed(cluster: QuorumProcesses) -> None:
    with WireClient.open(cluster.zk_address(1)) as wire:
        wire.sock.sendall(b"\x00\x00")  # half a frame length, then nothing
        assert wire.closed_by_server()  # after zookeeper.nio.sessionlessCnxnTimeout (1 s here)
    assert_still_serving(cluster, 1)


def test_max_client_connections_per_ip(cluster: QuorumProcesses) -> None:
    held = [WireClient.connect(cluster.zk_address(3)) for _ in range(MAX_CLIENT_CONNECTIONS - 1)]
    try:
        # The module's kazoo writer is on node 1: node 3 now holds MAX_CLIENT_CONNECTIONS - 1 of ours.
        last = WireClient.connect(cluster.zk_address(3))
        held.append(last)
        with WireClient.open(cluster.zk_address(3)) as refused:
            refused.sock.sendall(frame(connect_request()))
            assert refused.closed_by_server()
        last.sock.close()
        held.pop()

        def accepted() -> bool:
            try:
                with WireClient.connect(cluster.zk_address(3)) as again:
                    return again.session_id != 0
            except (EOFError, ConnectionError):
                return False

        wait_until(accepted, 10, message="a connection accepted once one of the IP's closed")
    finally:
        for wire in held:
            wire.sock.close()


def test_a_client_that_never_reads_is_bounded_and_holds_nobody_back(
    cluster: QuorumProcesses, writer: KazooClient
) -> None:
    writer.create("/large", b"x" * LARGE_NODE_BYTES)
    pid = cluster.pid(2)
    assert pid is not None
    before_bytes = resident_bytes(pid)
    with WireClient.connect(cluster.zk_address(2)) as slow:
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        request = ustring("/large") + boolean(False)
        burst = b"".join(frame(struct.pack(">ii", xid, jute.OP_GET_DATA) + request) for xid in range(1, 1001))
        slow.sock.settimeout(0.5)
        sent = 0
        for _ in range(SLOW_CLIENT_REQUESTS // 1000):
            try:
                slow.sock.sendall(burst)  # the node stops reading once the session is over its bounds
                sent += 1
            except TimeoutError:
                break
        # Another client on the same node is answered meanwhile.
        with WireClient.connect(cluster.zk_address(2)) as other:
            for _ in range(20):
                assert other.call(jute.OP_EXISTS, ustring("/large") + boolean(False)).err == 0
        growth_bytes = resident_bytes(pid) - before_bytes
        assert growth_bytes < SLOW_CLIENT_GROWTH_BYTES_MAX, f"node grew {growth_bytes >> 20} MiB for {sent}k requests"
    assert_still_serving(cluster, 2)


def test_random_frames_leave_the_node_serving(cluster: QuorumProcesses) -> None:
    """Random records under every opcode the server knows (and some it does not), pipelined on a few
    connections: each is answered or ends its connection, and the node serves on."""
    rng = random.Random(26)
    opcodes = [*sorted(jute._DECODERS), 0, 10, 20, 23, 99, 108, -10]
    for _ in range(FUZZ_CONNECTIONS):
        with WireClient.connect(cluster.zk_address(1)) as wire:
            frames = []
            for xid in range(1, FUZZ_FRAMES + 1):
                record = rng.randbytes(rng.randrange(0, 40))
                frames.append(frame(struct.pack(">ii", xid, rng.choice(opcodes)) + record))
            wire.sock.sendall(b"".join(frames))
            wire.sock.shutdown(socket.SHUT_WR)
            assert wire.closed_by_server()  # answered what it could, then closed: nothing more comes
        assert_still_serving(cluster, 1)


def test_a_taken_client_port_fails_the_start_in_one_line(tmp_path: Path) -> None:
    with QuorumProcesses(tmp_path, n=1, properties=FAST_ZK_PROPERTIES) as single:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
            holder.bind(("127.0.0.1", single.client_ports[1]))
            holder.listen()
            single.start(1)
            wait_until(lambda: single.returncode(1) is not None, LEADER_TIMEOUT_S, message="the node exited")
        assert single.returncode(1) == 1
        log = single.log_text(1)
        assert f"zkraft: error: cannot serve ZooKeeper clients on {single.zk_address(1)}" in log
        assert "address in use" in log and "Traceback" not in log
