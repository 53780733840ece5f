"""The ZooKeeper wire codec (zkemu.jute_codec) without a server: kazoo's own request records decode
into the core's requests, the core's replies encode into records kazoo reads back, and no bytes at
all make the decoder fail other than with JuteError (the server answers MARSHALLINGERROR or closes)."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.protocol import serialization as kz
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from zkemu import jute_codec as jute
from zkraft_proto import zk_pb2

STAT = zk_pb2.Stat(czxid=5, mzxid=6, ctime=7, mtime=8, version=1, data_length=3, num_children=2, pzxid=9)


def decode(request: object, xid: int = 7) -> tuple[int, zk_pb2.Request, jute.JuteReader]:
    payload = struct.pack(">ii", xid, request.type) + request.serialize()  # type: ignore[attr-defined]
    reader = jute.JuteReader()
    reader.reset(payload, 0, len(payload))
    req = zk_pb2.Request()
    return jute.decode_request(reader, req), req, reader


def encode_reply(encoder: jute.JuteEncoder, resp: zk_pb2.Response) -> bytes:
    out: list[bytes] = []
    encoder.encode(zk_pb2.ServerMessage(response=resp), out)
    frame = b"".join(out)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    return frame[4:]


def test_kazoo_requests_decode_into_core_requests() -> None:
    opcode, req, _ = decode(kz.Create("/a", b"d", OPEN_ACL_UNSAFE, 3))
    assert (opcode, req.xid, req.create.path, req.create.data, req.create.mode) == (1, 7, "/a", b"d", 3)
    assert list(req.create.acl) == []  # OPEN_ACL_UNSAFE: the default list, which the tree reads as open
    opcode, req, _ = decode(kz.Create("/a", b"d", CREATOR_ALL_ACL, 0))
    assert [(a.perms, a.id.scheme, a.id.id) for a in req.create.acl] == [(31, "auth", "")]
    opcode, req, _ = decode(kz.Create2("/b", b"", OPEN_ACL_UNSAFE, 0))
    assert (opcode, req.create.path) == (15, "/b")
    opcode, req, _ = decode(kz.GetChildren2("/c", True))
    assert (opcode, req.get_children.include_stat, req.get_children.watch) == (12, True, True)
    opcode, req, _ = decode(kz.SetData("/d", b"x", 4))
    assert (req.set_data.path, req.set_data.data, req.set_data.version) == ("/d", b"x", 4)
    opcode, req, reader = decode(
        kz.Transaction([kz.Create("/t", b"", OPEN_ACL_UNSAFE, 0), kz.CheckVersion("/t", 0), kz.Delete("/t", -1)])
    )
    assert opcode == jute.OP_MULTI and reader.op_types == [1, 13, 2]
    assert [op.WhichOneof("op") for op in req.multi.ops] == ["create", "check", "delete"]
    opcode, req, _ = decode(kz.Auth(0, "digest", "u:p"))
    assert (opcode, req.auth.scheme, req.auth.auth) == (100, "digest", b"u:p")


def test_kazoo_reads_the_encoded_replies() -> None:
    encoder = jute.JuteEncoder()
    for opcode in (jute.OP_CREATE, jute.OP_CREATE2, jute.OP_GET_DATA, jute.OP_EXISTS, jute.OP_GET_CHILDREN2):
        encoder.expect(opcode, 0.0)
    body = encode_reply(encoder, zk_pb2.Response(xid=1, zxid=9, path="/a"))
    assert struct.unpack_from(">iqi", body) == (1, 9, 0)
    assert kz.Create("/a", b"", OPEN_ACL_UNSAFE, 0).deserialize(body, 16) == "/a"
    body = encode_reply(encoder, zk_pb2.Response(xid=2, zxid=9, path="/b", stat=STAT))
    path, stat = kz.Create2("/b", b"", OPEN_ACL_UNSAFE, 0).deserialize(body, 16)
    assert (path, stat.czxid, stat.pzxid, stat.numChildren) == ("/b", 5, 9, 2)
    body = encode_reply(encoder, zk_pb2.Response(xid=3, zxid=9, data=b"abc", stat=STAT))
    data, stat = kz.GetData("/c", None).deserialize(body, 16)
    assert (data, stat.dataLength) == (b"abc", 3)
    body = encode_reply(encoder, zk_pb2.Response(xid=4, zxid=9, exists=False))
    assert struct.unpack(">iqi", body) == (4, 9, -101)  # exists on a missing node: NONODE, no record
    body = encode_reply(encoder, zk_pb2.Response(xid=5, zxid=9, children=["x", "y"], stat=STAT))
    children, stat = kz.GetChildren2("/d", None).deserialize(body, 16)
    assert (children, stat.version) == (["x", "y"], 1)
    assert not encoder.pending


def test_multi_replies_follow_each_ops_type() -> None:
    encoder = jute.JuteEncoder()
    encoder.expect(jute.OP_MULTI, 0.0, [jute.OP_CREATE, jute.OP_SET_DATA, jute.OP_CHECK])
    results = [zk_pb2.OpResult(path="/t"), zk_pb2.OpResult(stat=STAT), zk_pb2.OpResult()]
    body = encode_reply(encoder, zk_pb2.Response(xid=1, zxid=9, results=results))
    decoded = kz.Transaction([]).deserialize(body, 16)
    assert decoded[0] == "/t" and decoded[1].mzxid == 6 and decoded[2] is True
    encoder.expect(jute.OP_MULTI, 0.0, [jute.OP_CREATE, jute.OP_CHECK, jute.OP_DELETE])
    failed = [zk_pb2.OpResult(err=0), zk_pb2.OpResult(err=-103), zk_pb2.OpResult(err=-2)]
    body = encode_reply(encoder, zk_pb2.Response(xid=2, zxid=9, results=failed))
    decoded = kz.Transaction([]).deserialize(body, 16)
    assert [type(e).__name__ for e in decoded] == ["RolledBackError", "BadVersionError", "RuntimeInconsistency"]


def test_connect_response_carries_read_only_only_when_asked() -> None:
    resp = zk_pb2.ConnectResponse(session_id=3, timeout_ms=4000, password=b"p" * 16)
    assert len(jute.encode_connect(resp, with_read_only=True)) == 4 + 37
    assert len(jute.encode_connect(resp, with_read_only=False)) == 4 + 36
    request = struct.pack(">iqiq", 0, 5, 4000, 0) + struct.pack(">i", 16) + bytes(16)
    assert jute.decode_connect(request) == (
        zk_pb2.ConnectRequest(timeout_ms=4000, password=bytes(16), last_zxid_seen=5),
        False,
    )
    assert jute.decode_connect(request + b"\x00")[1] is True


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_jute_error(payload: bytes) -> None:
    reader = jute.JuteReader()
    reader.reset(payload, 0, len(payload))
    try:
        if len(payload) < 8:
            raise jute.JuteError("short")
        jute.decode_request(reader, zk_pb2.Request())
    except jute.JuteError:
        pass
    try:
        jute.decode_connect(payload)
    except jute.JuteError:
        pass


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(sorted(jute._DECODERS)), st.binary(max_size=120))
def test_every_opcode_with_any_record_decodes_or_raises_jute_error(opcode: int, record: bytes) -> None:
    payload = struct.pack(">ii", 1, opcode) + record
    reader = jute.JuteReader()
    reader.reset(payload, 0, len(payload))
    req = zk_pb2.Request()
    try:
        jute.decode_request(reader, req)
    except jute.JuteError:
        return
    zk_pb2.Request.FromString(req.SerializeToString())  # what decoded is a well-formed request
