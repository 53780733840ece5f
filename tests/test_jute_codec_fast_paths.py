"""The wire codec's fast paths (zkemu.jute_codec) against a plain field-by-field decoder and encoder:
every common request (getData, exists, getChildren(2), setData, delete, create in its four opcodes,
ping), whole, truncated or with lying lengths, decodes to the same core request or is refused alike,
and every common reply reads back, field by field, as the record its opcode names."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from zkemu import jute_codec as jute
from zkraft_proto import zk_pb2

OPEN_ACL = [(31, "world", "anyone")]


# ---- the reference: each record read field by field with JuteReader's primitives (zookeeper.jute)


def reference_decode(payload: bytes) -> tuple[int, zk_pb2.Request, int]:
    reader = jute.JuteReader()
    reader.reset(payload, 0, len(payload))
    xid, opcode = struct.unpack_from(">ii", payload)
    reader.pos = 8
    req = zk_pb2.Request(xid=xid)
    if opcode in (jute.OP_GET_DATA, jute.OP_EXISTS, jute.OP_GET_CHILDREN, jute.OP_GET_CHILDREN2):
        name = {jute.OP_GET_DATA: "get_data", jute.OP_EXISTS: "exists"}.get(opcode, "get_children")
        op = getattr(req, name)
        op.path = reader.ustring()
        op.watch = reader.bool()
        if opcode == jute.OP_GET_CHILDREN2:
            op.include_stat = True
    elif opcode == jute.OP_SET_DATA:
        req.set_data.path = reader.ustring()
        req.set_data.null_data = reader.next_is_null()
        req.set_data.data = reader.buffer()
        req.set_data.version = reader.int()
    elif opcode == jute.OP_DELETE:
        req.delete.path = reader.ustring()
        req.delete.version = reader.int()
    elif opcode in (jute.OP_CREATE, jute.OP_CREATE2, jute.OP_CREATE_CONTAINER, jute.OP_CREATE_TTL):
        _reference_create(reader, req.create, opcode)
    elif opcode == jute.OP_PING:
        req.ping.SetInParent()
    return opcode, req, reader.pos


def _reference_create(reader: jute.JuteReader, op: zk_pb2.CreateOp, opcode: int) -> None:
    op.path = reader.ustring()
    op.null_data = reader.next_is_null()
    op.data = reader.buffer()
    reader.acls(op.acl)
    flags = reader.int()
    if opcode == jute.OP_CREATE_CONTAINER:
        op.mode = jute.CREATE_MODE_CONTAINER
    else:
        op.mode = 0 if flags == jute.CREATE_MODE_CONTAINER else flags
    if opcode == jute.OP_CREATE_TTL:
        op.ttl_ms = reader.long()
    if [(a.perms, a.id.scheme, a.id.id) for a in op.acl] == OPEN_ACL:
        del op.acl[:]  # the fast path leaves the default list empty: the tree reads both as open


def fast_decode(payload: bytes) -> tuple[int, zk_pb2.Request, int]:
    reader = jute.JuteReader()
    reader.reset(bytearray(payload), 0, len(payload))  # the server's frames are in a bytearray
    req = zk_pb2.Request()
    opcode = jute.decode_request(reader, req)
    return opcode, req, reader.pos


def outcome(decode: Any, payload: bytes) -> tuple[Any, ...]:
    try:
        opcode, req, pos = decode(payload)
    except jute.JuteError:
        return ("refused",)
    return opcode, req.SerializeToString(deterministic=True), pos


# ---- generated requests


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">i", -1)
    raw = text.encode("utf-8")
    return struct.pack(">i", len(raw)) + raw


def _buffer(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


paths = st.one_of(st.none(), st.text(max_size=12), st.just("/bench/node-0000012345"))
datas = st.one_of(st.none(), st.binary(max_size=24))
ints = st.one_of(st.sampled_from([-1, 0, 1, 2, 3, 4, 5, 6, 7]), st.integers(-(2**31), 2**31 - 1))
acl_entries = st.tuples(
    st.integers(0, 31), st.sampled_from(["world", "auth", "digest", "ip", ""]), st.sampled_from(["anyone", "", "u:h"])
)
acls = st.one_of(st.just(OPEN_ACL), st.lists(acl_entries, max_size=3), st.none())


def _acls(entries: list[tuple[int, str, str]] | None) -> bytes:
    if entries is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">i", perms) + _string(scheme) + _string(id_) for perms, scheme, id_ in entries
    )


@st.composite
def requests(draw: Any) -> bytes:
    opcode = draw(
        st.sampled_from(
            [
                jute.OP_GET_DATA,
                jute.OP_EXISTS,
                jute.OP_GET_CHILDREN,
                jute.OP_GET_CHILDREN2,
                jute.OP_SET_DATA,
                jute.OP_DELETE,
                jute.OP_CREATE,
                jute.OP_CREATE2,
                jute.OP_CREATE_CONTAINER,
                jute.OP_CREATE_TTL,
                jute.OP_PING,
            ]
        )
    )
    path = _string(draw(paths))
    if opcode in (jute.OP_GET_DATA, jute.OP_EXISTS, jute.OP_GET_CHILDREN, jute.OP_GET_CHILDREN2):
        record = path + bytes([draw(st.sampled_from([0, 1, 2]))])
    elif opcode == jute.OP_SET_DATA:
        record = path + _buffer(draw(datas)) + struct.pack(">i", draw(ints))
    elif opcode == jute.OP_DELETE:
        record = path + struct.pack(">i", draw(ints))
    elif opcode == jute.OP_PING:
        record = b""
    else:
        record = path + _buffer(draw(datas)) + _acls(draw(acls)) + struct.pack(">i", draw(ints))
        if opcode == jute.OP_CREATE_TTL:
            record += struct.pack(">q", draw(st.integers(-(2**63), 2**63 - 1)))
    payload = struct.pack(">ii", draw(ints), opcode) + record
    # Truncated, lengthened or with one byte changed (a length that lies): refused or decoded alike.
    damage = draw(st.sampled_from(["none", "none", "cut", "extra", "flip"]))
    if damage == "cut":
        payload = payload[: draw(st.integers(8, len(payload)))]
    elif damage == "extra":
        payload += draw(st.binary(min_size=1, max_size=8))
    elif damage == "flip" and len(payload) > 8:
        at = draw(st.integers(8, len(payload) - 1))
        payload = payload[:at] + bytes([draw(st.integers(0, 255))]) + payload[at + 1 :]
    return payload


@settings(max_examples=1500, deadline=None)
@given(requests())
def test_fast_paths_decode_as_the_field_by_field_reader(payload: bytes) -> None:
    assert outcome(fast_decode, payload) == outcome(reference_decode, payload)


# ---- replies


stats_ = st.builds(
    zk_pb2.Stat,
    czxid=st.integers(0, 2**63 - 1),
    mzxid=st.integers(0, 2**63 - 1),
    ctime=st.integers(0, 2**63 - 1),
    mtime=st.integers(0, 2**63 - 1),
    version=st.integers(-(2**31), 2**31 - 1),
    cversion=st.integers(-(2**31), 2**31 - 1),
    aversion=st.integers(-(2**31), 2**31 - 1),
    ephemeral_owner=st.integers(-(2**63), 2**63 - 1),
    data_length=st.integers(0, 2**31 - 1),
    num_children=st.integers(0, 2**31 - 1),
    pzxid=st.integers(0, 2**63 - 1),
)
_STAT = struct.Struct(">qqqqiiiqiiq")


def _stat_tuple(stat: zk_pb2.Stat) -> tuple[int, ...]:
    return (
        stat.czxid,
        stat.mzxid,
        stat.ctime,
        stat.mtime,
        stat.version,
        stat.cversion,
        stat.aversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children,
        stat.pzxid,
    )


class Frame:
    """Reads one encoded reply frame back, field by field."""

    def __init__(self, frame: bytes) -> None:
        (length,) = struct.unpack_from(">i", frame)
        assert length == len(frame) - 4, "the frame length counts the whole reply"
        self.buf, self.pos = frame, 4

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def string(self) -> bytes | None:
        (size,) = self.take(">i")
        if size < 0:
            return None
        value = self.buf[self.pos : self.pos + size]
        self.pos += size
        return value

    def stat(self) -> tuple[int, ...]:
        return self.take(_STAT.format)


@settings(max_examples=1000, deadline=None)
@given(
    st.sampled_from(
        [
            jute.OP_GET_DATA,
            jute.OP_EXISTS,
            jute.OP_SET_DATA,
            jute.OP_SET_ACL,
            jute.OP_CREATE,
            jute.OP_SYNC,
            jute.OP_CREATE2,
            jute.OP_CREATE_TTL,
            jute.OP_DELETE,
            jute.OP_PING,
            jute.OP_GET_CHILDREN,
            jute.OP_GET_CHILDREN2,
        ]
    ),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**63 - 1),
    stats_,
    st.booleans(),
    datas,
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=4),
)
def test_fast_replies_read_back_as_their_records(
    opcode: int,
    xid: int,
    zxid: int,
    stat: zk_pb2.Stat,
    exists: bool,
    data: bytes | None,
    path: str,
    children: list[str],
) -> None:
    resp = zk_pb2.Response(xid=xid, zxid=zxid, stat=stat, exists=exists, path=path, children=children)
    if data is None:
        resp.null_data = True
    else:
        resp.data = data
    encoder = jute.JuteEncoder()
    encoder.expect(opcode, 0.0)
    out: list[bytes] = []
    encoder.encode(zk_pb2.ServerMessage(response=resp), out)
    frame = Frame(b"".join(out))
    if opcode == jute.OP_EXISTS and not exists:
        assert frame.take(">iqi") == (xid, zxid, jute.Code.NONODE)
        assert frame.pos == len(frame.buf)
        return
    assert frame.take(">iqi") == (xid, zxid, 0)
    if opcode == jute.OP_GET_DATA:
        assert frame.string() == data
    elif opcode in (jute.OP_CREATE, jute.OP_SYNC, jute.OP_CREATE2, jute.OP_CREATE_TTL):
        assert frame.string() == path.encode("utf-8")
    elif opcode in (jute.OP_GET_CHILDREN, jute.OP_GET_CHILDREN2):
        (count,) = frame.take(">i")
        assert [frame.string() for _ in range(count)] == [c.encode("utf-8") for c in children]
    if opcode in (
        jute.OP_GET_DATA,
        jute.OP_EXISTS,
        jute.OP_SET_DATA,
        jute.OP_SET_ACL,
        jute.OP_CREATE2,
        jute.OP_CREATE_TTL,
        jute.OP_GET_CHILDREN2,
    ):
        assert frame.stat() == _stat_tuple(stat)
    assert frame.pos == len(frame.buf), "nothing after the record"


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 7), st.integers(0, 3), st.text(max_size=12), st.integers(-1, 2**63 - 1))
def test_watch_events_read_back_as_kazoo_reads_them(event_type: int, state: int, path: str, zxid: int) -> None:
    out: list[bytes] = []
    event = zk_pb2.WatchEvent(type=event_type, state=state, path=path, zxid=zxid)
    jute.JuteEncoder().encode(zk_pb2.ServerMessage(event=event), out)
    frame = Frame(b"".join(out))
    assert frame.take(">iqi") == (jute.XID_NOTIFICATION, zxid, 0)
    assert frame.take(">ii") == (event_type, state or jute.KEEPER_STATE_SYNC_CONNECTED)
    assert frame.string() == path.encode("utf-8")
    assert frame.pos == len(frame.buf)
