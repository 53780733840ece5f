"""ZooKeeper's wire records (jute) to and from the session core's messages.

Requests are decoded straight into `zk_pb2.Request` (what the session core reads), replies and
watch events encoded from `zk_pb2.Response` / `zk_pb2.WatchEvent` (what it writes), with `struct`
(ZooKeeper's BinaryInputArchive/BinaryOutputArchive: big-endian ints and longs, buffers and
strings as an int length (-1: null) and their bytes, vectors as an int count and elements, a
record its fields in order, no tags). Frames are an int length and that many bytes.

A reply's record depends on its request's opcode (create 1 answers CreateResponse, create2
Create2Response, exists on a missing node ReplyHeader err NONODE and no record, ...), and the core
answers in request order (ZooKeeper's per-session FIFO), so `JuteEncoder` keeps the opcodes of
the requests awaiting replies in a deque, appended by `decode_request`'s caller.

Sources: zookeeper-jute/src/main/resources/zookeeper.jute (the records), ZooDefs.OpCode,
FinalRequestProcessor (which record answers which opcode), MultiOperationRecord / MultiResponse.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from typing import Any

from zkemu.errors import Code
from zkemu.server_stats import ConnectionStats
from zkraft_proto import zk_pb2

# ---- opcodes (ZooDefs.OpCode)
OP_NOTIFICATION = 0
OP_CREATE = 1
OP_DELETE = 2
OP_EXISTS = 3
OP_GET_DATA = 4
OP_SET_DATA = 5
OP_GET_ACL = 6
OP_SET_ACL = 7
OP_GET_CHILDREN = 8
OP_SYNC = 9
OP_PING = 11
OP_GET_CHILDREN2 = 12
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15
OP_RECONFIG = 16
OP_CHECK_WATCHES = 17
OP_REMOVE_WATCHES = 18
OP_CREATE_CONTAINER = 19
OP_CREATE_TTL = 21
OP_MULTI_READ = 22
OP_AUTH = 100
OP_SET_WATCHES = 101
OP_SASL = 102
OP_GET_EPHEMERALS = 103
OP_GET_ALL_CHILDREN_NUMBER = 104
OP_SET_WATCHES2 = 105
OP_ADD_WATCH = 106
OP_WHO_AM_I = 107
OP_CLOSE_SESSION = -11
OP_ERROR = -1
# An opcode this server does not know: answered UNIMPLEMENTED, then the connection closes
# (ZooKeeperServer.submitRequestNow -> UnimplementedRequestProcessor).
OP_UNKNOWN = -1000
# A request whose record did not parse: the core answers it in its turn (it has no op), and the
# encoder writes MARSHALLINGERROR (PrepRequestProcessor / FinalRequestProcessor catch it so).
OP_MARSHALLING_ERROR = -1001

XID_NOTIFICATION = -1
XID_PING = -2
XID_AUTH = -4
KEEPER_STATE_SYNC_CONNECTED = 3
# CreateMode.CONTAINER: what createContainer (19) creates whatever flags it carries.
CREATE_MODE_CONTAINER = 4
# ConnectRequest without its readOnly byte: protocolVersion, lastZxidSeen, timeOut, sessionId and
# a 16-byte password (ClientCnxn, ProtocolManager.isReadonlyAvailable).
CONNECT_REQUEST_BYTES_MIN = 4 + 8 + 4 + 8 + 4

# ZooKeeper's names of the operations, as `cons` prints a connection's last one (ServerCnxn lastOp).
OPERATION_NAMES = {
    OP_CREATE: "CREA",
    OP_CREATE2: "CREA",
    OP_CREATE_CONTAINER: "CREA",
    OP_CREATE_TTL: "CREA",
    OP_DELETE: "DELE",
    OP_EXISTS: "EXIS",
    OP_GET_DATA: "GETD",
    OP_SET_DATA: "SETD",
    OP_GET_ACL: "GETA",
    OP_SET_ACL: "SETA",
    OP_GET_CHILDREN: "GETC",
    OP_GET_CHILDREN2: "GETC",
    OP_SYNC: "SYNC",
    OP_PING: "PING",
    OP_CHECK: "CHEC",
    OP_MULTI: "MULT",
    OP_MULTI_READ: "MLTR",
    OP_RECONFIG: "RECO",
    OP_CHECK_WATCHES: "CHKW",
    OP_REMOVE_WATCHES: "REMW",
    OP_AUTH: "AUTH",
    OP_SET_WATCHES: "SETW",
    OP_SET_WATCHES2: "STW2",
    OP_SASL: "SASL",
    OP_GET_EPHEMERALS: "GETE",
    OP_GET_ALL_CHILDREN_NUMBER: "GETACN",
    OP_ADD_WATCH: "ADDW",
    OP_WHO_AM_I: "HOMI",
    OP_CLOSE_SESSION: "CLOSE",
    OP_UNKNOWN: "UNKN",
    OP_MARSHALLING_ERROR: "UNKN",
}

_INT = struct.Struct(">i")
_NULL_LENGTH = _INT.pack(-1)  # a null buffer or string
_LONG = struct.Struct(">q")
_HEADER = struct.Struct(">ii")  # RequestHeader{xid, type}
_REPLY_HEADER = struct.Struct(">iiqi")  # frame length, ReplyHeader{xid, zxid, err}
_STAT = struct.Struct(">qqqqiiiqiiq")  # 68 bytes, Stat's fields in order
_MULTI_HEADER = struct.Struct(">i?i")  # MultiHeader{type, done, err}
_CONNECT = struct.Struct(">iqiq")  # protocolVersion, lastZxidSeen, timeOut, sessionId
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)
_EMPTY_STAT = _STAT.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


class JuteError(ValueError):
    """A frame that is not the record its opcode says (truncated, or a length that lies)."""


class JuteReader:
    """Reads one frame's record fields; reused for every frame of a connection."""

    __slots__ = ("buf", "pos", "end", "op_types")

    def __init__(self) -> None:
        self.buf: bytes | bytearray | memoryview = b""
        self.pos = 0
        self.end = 0
        # The last multi's / multiRead's op types as sent (create 1 vs create2 15): the reply follows them.
        self.op_types: list[int] = []

    def reset(self, buf: bytes | bytearray | memoryview, start: int, end: int) -> None:
        self.buf = buf
        self.pos = start
        self.end = end

    def need(self, size: int) -> None:
        if size < 0 or self.pos + size > self.end:
            raise JuteError(f"record truncated: {size} bytes wanted at offset {self.pos}, frame ends at {self.end}")

    def int(self) -> int:
        self.need(4)
        (value,) = _INT.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def long(self) -> int:
        self.need(8)
        (value,) = _LONG.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def bool(self) -> bool:
        self.need(1)
        value = self.buf[self.pos] != 0
        self.pos += 1
        return value

    def buffer(self) -> bytes:
        """A buffer's bytes; null reads as empty (`is_null` tells them apart where it matters)."""
        size = self.int()
        if size == -1:
            return b""  # null
        if size < 0:
            raise JuteError(f"buffer length {size} is negative")
        self.need(size)
        value = bytes(self.buf[self.pos : self.pos + size])
        self.pos += size
        return value

    def next_is_null(self) -> bool:
        """Whether the next field, a buffer, is null (length -1), without reading it."""
        return self.end - self.pos >= 4 and _INT.unpack_from(self.buf, self.pos)[0] == -1

    def ustring(self) -> str:
        size = self.int()
        if size == -1:
            return ""  # null: kazoo writes an empty string so
        if size < 0:
            raise JuteError(f"string length {size} is negative")
        self.need(size)
        try:
            value = bytes(self.buf[self.pos : self.pos + size]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JuteError(f"string is not UTF-8: {exc}") from None
        self.pos += size
        return value

    def count(self) -> int:
        """A vector's element count; -1 (null) is none. Each element takes at least 4 bytes, so a
        count the frame cannot hold is a lie caught before anything is allocated for it."""
        n = self.int()
        if n == -1:
            return 0
        if n < 0 or n * 4 > self.end - self.pos:
            raise JuteError(f"vector of {n} elements does not fit in the frame")
        return n

    def strings(self) -> list[str]:
        return [self.ustring() for _ in range(self.count())]

    def acls(self, into: Any) -> None:
        for _ in range(self.count()):
            acl = into.add()
            acl.perms = self.int()
            acl.id.scheme = self.ustring()
            acl.id.id = self.ustring()


# ---- the handshake


def decode_connect(payload: bytes | bytearray | memoryview) -> tuple[zk_pb2.ConnectRequest, bool]:
    """ConnectRequest{protocolVersion, lastZxidSeen, timeOut, sessionId, passwd[, readOnly]}; the second
    value says whether it carried readOnly (then the ConnectResponse carries it too)."""
    reader = JuteReader()
    reader.reset(payload, 0, len(payload))
    if len(payload) < CONNECT_REQUEST_BYTES_MIN:
        raise JuteError(f"ConnectRequest of {len(payload)} bytes is truncated")
    _, last_zxid, timeout_ms, session_id = _CONNECT.unpack_from(payload, 0)
    reader.pos = _CONNECT.size
    password = reader.buffer()
    has_read_only = reader.pos < reader.end
    if has_read_only:
        reader.bool()
    req = zk_pb2.ConnectRequest(
        session_id=session_id, password=password, timeout_ms=timeout_ms, last_zxid_seen=last_zxid
    )
    return req, has_read_only


def encode_connect(resp: zk_pb2.ConnectResponse, with_read_only: bool) -> bytes:
    """ConnectResponse{protocolVersion 0, timeOut, sessionId, passwd[, readOnly false]}, framed."""
    password = resp.password
    body = struct.pack(">iiqi", 0, resp.timeout_ms, resp.session_id, len(password)) + password
    if with_read_only:
        body += b"\x00"
    return _INT.pack(len(body)) + body


# ---- requests


def decode_request(reader: JuteReader, req: zk_pb2.Request) -> int:
    """Fill `req` from the frame `reader` holds (RequestHeader + record); returns the opcode, with
    OP_UNKNOWN for one this server does not know. Raises JuteError for a record that does not parse."""
    xid, opcode = _HEADER.unpack_from(reader.buf, reader.pos) if reader.end - reader.pos >= 8 else _short(reader)
    reader.pos += 8
    req.xid = xid
    decode = _DECODERS.get(opcode)
    if decode is None:
        return OP_UNKNOWN
    decode(reader, req, opcode)
    return int(opcode)


def _short(reader: JuteReader) -> tuple[int, int]:
    raise JuteError(f"frame of {reader.end - reader.pos} bytes has no RequestHeader")


# ---- fast paths for the common requests (the Java client's and kazoo's load)
#
# Each reads its record's fixed layout with one struct.unpack_from per field group, straight from
# the frame, when the lengths are plausible; anything else (a null path, a length that lies, a
# truncated record) takes the general JuteReader path, which raises JuteError as it always did.
# tests/test_jute_codec.py checks that both paths decode every generated request alike.

# OPEN_ACL_UNSAFE as a client writes it: one ACL{perms ALL, Id{"world", "anyone"}}. A create that
# carries it leaves the CreateOp's list empty, which the tree reads as that same list (zkemu.tree's
# create: "an empty list is the default"), so no Acl/Id messages are built for it.
_OPEN_ACL_BYTES = struct.pack(">iii5si6s", 1, 31, 5, b"world", 6, b"anyone")
_OPEN_ACL_SIZE = len(_OPEN_ACL_BYTES)


def _text(buf: bytes | bytearray | memoryview, start: int, end: int) -> str:
    try:
        return str(buf[start:end], "utf-8")
    except UnicodeDecodeError as exc:
        raise JuteError(f"string is not UTF-8: {exc}") from None


def _path_end(reader: JuteReader, tail_bytes: int) -> int:
    """Where the record's leading path ends, when the path is a plain string followed by at least
    `tail_bytes` more bytes of the frame; -1 sends the caller to the general path."""
    pos = reader.pos
    if reader.end - pos < 4 + tail_bytes:
        return -1
    (size,) = _INT.unpack_from(reader.buf, pos)
    after = pos + 4 + size
    return after if size >= 0 and after + tail_bytes <= reader.end else -1


def _path_and_watch(reader: JuteReader, op: Any) -> None:
    """{ustring path, boolean watch}: getData, exists, getChildren(2)."""
    after = _path_end(reader, 1)
    if after < 0:
        op.path = reader.ustring()
        op.watch = reader.bool()
        return
    buf = reader.buf
    op.path = _text(buf, reader.pos + 4, after)
    op.watch = buf[after] != 0
    reader.pos = after + 1


def _create_into(reader: JuteReader, op: zk_pb2.CreateOp, opcode: int) -> None:
    """{ustring path, buffer data, vector<ACL> acl, int flags[, long ttl]}."""
    after = _path_end(reader, 8)
    buf = reader.buf
    if after >= 0 and (size := _INT.unpack_from(buf, after)[0]) >= 0 and after + 4 + size <= reader.end:
        op.path = _text(buf, reader.pos + 4, after)
        op.data = bytes(buf[after + 4 : after + 4 + size])
        reader.pos = after + 4 + size
    else:
        op.path = reader.ustring()
        op.null_data = reader.next_is_null()
        op.data = reader.buffer()
    pos = reader.pos
    if reader.end - pos >= _OPEN_ACL_SIZE + 4 and buf[pos : pos + _OPEN_ACL_SIZE] == _OPEN_ACL_BYTES:
        reader.pos = pos + _OPEN_ACL_SIZE  # the default list: left empty (see _OPEN_ACL_BYTES)
    else:
        reader.acls(op.acl)
    flags = reader.int()
    # create/create2 with the CONTAINER flag make a persistent node in ZooKeeper (their CreateTxn carries
    # no container owner; only createContainer's CreateContainerTxn does): checked against ZooKeeper 3.9.
    if opcode == OP_CREATE_CONTAINER:
        op.mode = CREATE_MODE_CONTAINER
    elif flags:
        op.mode = 0 if flags == CREATE_MODE_CONTAINER else flags
    if opcode == OP_CREATE_TTL:
        op.ttl_ms = reader.long()


def _create(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    _create_into(reader, req.create, opcode)


def _delete(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    op = req.delete
    after = _path_end(reader, 4)
    if after < 0:
        op.path = reader.ustring()
        op.version = reader.int()
        return
    buf = reader.buf
    op.path = _text(buf, reader.pos + 4, after)
    (version,) = _INT.unpack_from(buf, after)
    if version:
        op.version = version
    reader.pos = after + 4


def _exists(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    _path_and_watch(reader, req.exists)


def _get_data(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    _path_and_watch(reader, req.get_data)


def _set_data(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    """{ustring path, buffer data, int version}; the fast path takes a path and data of plain lengths."""
    op = req.set_data
    after = _path_end(reader, 8)
    if after >= 0:
        buf = reader.buf
        (size,) = _INT.unpack_from(buf, after)
        data_end = after + 4 + size
        if size >= 0 and data_end + 4 <= reader.end:
            op.path = _text(buf, reader.pos + 4, after)
            op.data = bytes(buf[after + 4 : data_end])
            (version,) = _INT.unpack_from(buf, data_end)
            if version:
                op.version = version
            reader.pos = data_end + 4
            return
    op.path = reader.ustring()
    op.null_data = reader.next_is_null()
    op.data = reader.buffer()
    op.version = reader.int()


def _get_acl(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.get_acl.path = reader.ustring()


def _set_acl(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    op = req.set_acl
    op.path = reader.ustring()
    reader.acls(op.acl)
    op.version = reader.int()


def _get_children(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    op = req.get_children
    _path_and_watch(reader, op)
    if opcode == OP_GET_CHILDREN2:
        op.include_stat = True


def _sync(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.sync.path = reader.ustring()


def _ping(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.ping.SetInParent()


def _close(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.close.SetInParent()


def _check(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.check.path = reader.ustring()
    req.check.version = reader.int()


def _multi(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    """MultiOperationRecord: MultiHeader{type, done, err} + the op's record, until done (§2.4)."""
    req.multi.SetInParent()
    _ops_into(reader, req.multi.ops, _MULTI_OP_DECODERS, "multi: op type {} is not create, delete, setData or check")


def _multi_read(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.multi_read.SetInParent()
    _ops_into(
        reader, req.multi_read.ops, _MULTI_READ_OP_DECODERS, "multiRead: op type {} is not getData or getChildren"
    )


def _ops_into(reader: JuteReader, ops: Any, decoders: dict[int, Decoder], refusal: str) -> None:
    """The ops of a multi or multiRead, each by the decoder of its lone request: an Op (ReadOp) names
    its fields as a Request does. Each op's type is kept in the ops' order: the reply's per-op
    records follow them (JuteEncoder)."""
    reader.op_types = op_types = []
    while True:
        reader.need(_MULTI_HEADER.size)
        op_type, done, _ = _MULTI_HEADER.unpack_from(reader.buf, reader.pos)
        reader.pos += _MULTI_HEADER.size
        if done:
            return
        decode = decoders.get(op_type)
        if decode is None:
            raise JuteError(refusal.format(op_type))
        op_types.append(op_type)
        decode(reader, ops.add(), op_type)


def _auth(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    reader.int()  # AuthPacket.type: unused (ZooKeeper ignores it too)
    req.auth.scheme = reader.ustring()
    req.auth.auth = reader.buffer()


def _sasl(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    """GetSASLRequest{buffer token}: one token of the session's SASL login (zkemu.sasl)."""
    req.sasl.token = reader.buffer()


def _set_watches(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    op = req.set_watches
    op.relative_zxid = reader.long()
    op.data_watches.extend(reader.strings())
    op.exist_watches.extend(reader.strings())
    op.child_watches.extend(reader.strings())
    if opcode == OP_SET_WATCHES2:
        op.persistent_watches.extend(reader.strings())
        op.persistent_recursive_watches.extend(reader.strings())


def _get_ephemerals(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.get_ephemerals.prefix_path = reader.ustring()


def _get_all_children_number(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.get_all_children_number.path = reader.ustring()


def _add_watch(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.add_watch.path = reader.ustring()
    req.add_watch.mode = reader.int()


def _remove_watches(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.remove_watches.path = reader.ustring()
    req.remove_watches.watcher_type = reader.int()


def _check_watches(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.check_watches.path = reader.ustring()
    req.check_watches.watcher_type = reader.int()


def _who_am_i(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    req.who_am_i.SetInParent()


def _reconfig(reader: JuteReader, req: zk_pb2.Request, opcode: int) -> None:
    """ReconfigRequest{ustring joiningServers, ustring leavingServers, ustring newMembers, long curConfigId};
    a null string stays unset (ZooKeeper tells an incremental reconfig by a null newMembers)."""
    r = req.reconfig
    for field in ("joining_servers", "leaving_servers", "new_members"):
        if reader.next_is_null():
            reader.int()
        else:
            setattr(r, field, reader.ustring())
    r.cur_config_id = reader.long()


# A request's record, decoded into the message with the request's field names (a Request, or a multi's Op).
Decoder = Callable[["JuteReader", Any, int], None]
_DECODERS: dict[int, Decoder] = {
    OP_CREATE: _create,
    OP_CREATE2: _create,
    OP_CREATE_CONTAINER: _create,
    OP_CREATE_TTL: _create,
    OP_DELETE: _delete,
    OP_EXISTS: _exists,
    OP_GET_DATA: _get_data,
    OP_SET_DATA: _set_data,
    OP_GET_ACL: _get_acl,
    OP_SET_ACL: _set_acl,
    OP_GET_CHILDREN: _get_children,
    OP_GET_CHILDREN2: _get_children,
    OP_SYNC: _sync,
    OP_PING: _ping,
    OP_CLOSE_SESSION: _close,
    OP_CHECK: _check,
    OP_MULTI: _multi,
    OP_MULTI_READ: _multi_read,
    OP_AUTH: _auth,
    OP_SET_WATCHES: _set_watches,
    OP_SET_WATCHES2: _set_watches,
    OP_GET_EPHEMERALS: _get_ephemerals,
    OP_GET_ALL_CHILDREN_NUMBER: _get_all_children_number,
    OP_ADD_WATCH: _add_watch,
    OP_REMOVE_WATCHES: _remove_watches,
    OP_CHECK_WATCHES: _check_watches,
    OP_WHO_AM_I: _who_am_i,
    OP_RECONFIG: _reconfig,
    OP_SASL: _sasl,
}
# What a multi may hold (MultiOperationRecord), and a multiRead.
_MULTI_OP_DECODERS: dict[int, Decoder] = {
    op: _DECODERS[op]
    for op in (OP_CREATE, OP_CREATE2, OP_CREATE_CONTAINER, OP_CREATE_TTL, OP_DELETE, OP_SET_DATA, OP_CHECK)
}
_MULTI_READ_OP_DECODERS: dict[int, Decoder] = {op: _DECODERS[op] for op in (OP_GET_DATA, OP_GET_CHILDREN)}


# ---- replies and events


def _ustring(out: list[bytes], text: str) -> None:
    raw = text.encode("utf-8")
    out.append(_INT.pack(len(raw)))
    out.append(raw)


def _buffer(out: list[bytes], raw: bytes, null: bool = False) -> None:
    if null:
        out.append(_NULL_LENGTH)
        return
    out.append(_INT.pack(len(raw)))
    out.append(raw)


def _stat(out: list[bytes], st: zk_pb2.Stat) -> None:
    out.append(
        _STAT.pack(
            st.czxid,
            st.mzxid,
            st.ctime,
            st.mtime,
            st.version,
            st.cversion,
            st.aversion,
            st.ephemeral_owner,
            st.data_length,
            st.num_children,
            st.pzxid,
        )
    )


def _strings(out: list[bytes], items: Any) -> None:
    out.append(_INT.pack(len(items)))
    for item in items:
        _ustring(out, item)


def _acls(out: list[bytes], acls: Any) -> None:
    out.append(_INT.pack(len(acls)))
    for acl in acls:
        out.append(_INT.pack(acl.perms))
        _ustring(out, acl.id.scheme)
        _ustring(out, acl.id.id)


def _write_body(out: list[bytes], opcode: int, resp: zk_pb2.Response) -> None:
    """The response record of a successful request of `opcode` (FinalRequestProcessor)."""
    if opcode in (OP_GET_DATA, OP_RECONFIG):  # reconfig answers as getData of /zookeeper/config
        _buffer(out, resp.data, resp.null_data)
        _stat(out, resp.stat)
    elif opcode == OP_EXISTS or opcode == OP_SET_DATA or opcode == OP_SET_ACL:
        _stat(out, resp.stat)
    elif opcode == OP_GET_CHILDREN:
        _strings(out, resp.children)
    elif opcode == OP_GET_CHILDREN2:
        _strings(out, resp.children)
        _stat(out, resp.stat)
    elif opcode == OP_CREATE or opcode == OP_SYNC:
        _ustring(out, resp.path)
    elif opcode in (OP_CREATE2, OP_CREATE_CONTAINER, OP_CREATE_TTL):
        _ustring(out, resp.path)
        _stat(out, resp.stat)
    elif opcode == OP_CHECK:
        # SetDataResponse{stat}; a lone check changes nothing and has no Stat of its own.
        out.append(_STAT.pack(*_stat_fields(resp.stat)) if resp.HasField("stat") else _EMPTY_STAT)
    elif opcode == OP_GET_ACL:
        _acls(out, resp.acls)
        _stat(out, resp.stat)
    elif opcode == OP_GET_EPHEMERALS:
        _strings(out, resp.paths)
    elif opcode == OP_GET_ALL_CHILDREN_NUMBER:
        out.append(_INT.pack(resp.number))
    elif opcode == OP_ADD_WATCH:
        out.append(_INT.pack(0))  # ErrorResponse{0}
    elif opcode == OP_WHO_AM_I:
        out.append(_INT.pack(len(resp.client_infos)))
        for info in resp.client_infos:
            _ustring(out, info.auth_scheme)
            _ustring(out, info.user)
    # delete, ping, setWatches(2), removeWatches, checkWatches, auth, closeSession: no record


def _stat_fields(st: zk_pb2.Stat) -> tuple[int, ...]:
    return (
        st.czxid,
        st.mzxid,
        st.ctime,
        st.mtime,
        st.version,
        st.cversion,
        st.aversion,
        st.ephemeral_owner,
        st.data_length,
        st.num_children,
        st.pzxid,
    )


def _write_multi(out: list[bytes], op_types: list[int], resp: zk_pb2.Response, atomic: bool) -> None:
    """MultiResponse (§2.4): a failed multi's results are all ErrorResults (type -1, err 0 before the
    failed op, its code, RUNTIMEINCONSISTENCY after); a successful one's follow each op's type (kazoo
    reads create results as type 1, so an op 1 create answers a CreateResponse)."""
    results = resp.results
    # multi is all or nothing; multiRead's reads stand alone: only a failed one is an ErrorResult.
    failed = atomic and any(r.err for r in results)
    for op_type, result in zip(op_types, results, strict=False):
        if failed or result.err:
            out.append(_MULTI_HEADER.pack(OP_ERROR, False, result.err))
            out.append(_INT.pack(result.err))
            continue
        out.append(_MULTI_HEADER.pack(op_type, False, 0))
        if op_type == OP_CREATE:
            _ustring(out, result.path)
        elif op_type in (OP_CREATE2, OP_CREATE_CONTAINER, OP_CREATE_TTL):
            _ustring(out, result.path)
            _stat(out, result.stat)
        elif op_type == OP_SET_DATA:
            _stat(out, result.stat)
        elif op_type == OP_GET_DATA:
            _buffer(out, result.data, result.null_data)
            _stat(out, result.stat)
        elif op_type == OP_GET_CHILDREN:
            _strings(out, result.children)
    out.append(_MULTI_END)


# ---- the common replies in one or a few struct.pack calls
#
# Each writes ReplyHeader{xid, zxid, err 0} with its record; a Stat is 68 bytes of fixed layout, so a
# header + Stat reply is one pack. The others (_write_body) build their parts and measure them.
_REPLY_STAT = struct.Struct(">iiqi" + _STAT.format[1:])  # frame length, ReplyHeader, Stat
_REPLY_SIZED = struct.Struct(">iiqii")  # frame length, ReplyHeader, a buffer's or string's length
# frame length, ReplyHeader, WatcherEvent{type, state, the path's length}
_EVENT_HEADER = struct.Struct(">iiqiiii")
_HEADER_BYTES = 16  # ReplyHeader{xid, zxid, err}: what the frame length counts besides the record


def _reply_stat(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    """setData, setACL: SetDataResponse / SetACLResponse{stat}."""
    out.append(_REPLY_STAT.pack(_HEADER_BYTES + _STAT.size, xid, zxid, 0, *_stat_fields(resp.stat)))


def _reply_exists(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    """exists: ExistsResponse{stat}, or for a missing node NONODE and no record."""
    if not resp.exists:
        out.append(_REPLY_HEADER.pack(_HEADER_BYTES, xid, zxid, Code.NONODE))
        return
    _reply_stat(out, xid, zxid, resp)


def _reply_data(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    """getData: GetDataResponse{buffer data, stat}."""
    stat = _STAT.pack(*_stat_fields(resp.stat))
    if resp.null_data:
        out.append(_REPLY_SIZED.pack(_HEADER_BYTES + 4 + _STAT.size, xid, zxid, 0, -1))
        out.append(stat)
        return
    data = resp.data
    out.append(_REPLY_SIZED.pack(_HEADER_BYTES + 4 + len(data) + _STAT.size, xid, zxid, 0, len(data)))
    out.append(data)
    out.append(stat)


def _reply_path(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    """create, sync: CreateResponse / SyncResponse{ustring path}."""
    raw = resp.path.encode("utf-8")
    out.append(_REPLY_SIZED.pack(_HEADER_BYTES + 4 + len(raw), xid, zxid, 0, len(raw)))
    out.append(raw)


def _reply_path_stat(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    """create2, createContainer, createTTL: Create2Response{ustring path, stat}."""
    raw = resp.path.encode("utf-8")
    out.append(_REPLY_SIZED.pack(_HEADER_BYTES + 4 + len(raw) + _STAT.size, xid, zxid, 0, len(raw)))
    out.append(raw)
    out.append(_STAT.pack(*_stat_fields(resp.stat)))


def _reply_empty(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    """delete, ping, setWatches(2), removeWatches, checkWatches, closeSession: no record."""
    out.append(_REPLY_HEADER.pack(_HEADER_BYTES, xid, zxid, 0))


def _reply_children(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response, with_stat: bool) -> None:
    """getChildren(2): GetChildren(2)Response{vector<ustring> children[, stat]}."""
    parts: list[bytes] = []
    for child in resp.children:
        raw = child.encode("utf-8")
        parts.append(_INT.pack(len(raw)))
        parts.append(raw)
    body = b"".join(parts)
    stat_bytes = _STAT.size if with_stat else 0
    out.append(_REPLY_SIZED.pack(_HEADER_BYTES + 4 + len(body) + stat_bytes, xid, zxid, 0, len(resp.children)))
    out.append(body)
    if with_stat:
        out.append(_STAT.pack(*_stat_fields(resp.stat)))


def _reply_children1(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    _reply_children(out, xid, zxid, resp, False)


def _reply_children2(out: list[bytes], xid: int, zxid: int, resp: zk_pb2.Response) -> None:
    _reply_children(out, xid, zxid, resp, True)


# The successful replies written without _write_body's measuring; the rest go through it.
_FAST_REPLIES: dict[int, Callable[[list[bytes], int, int, zk_pb2.Response], None]] = {
    OP_GET_DATA: _reply_data,
    OP_EXISTS: _reply_exists,
    OP_SET_DATA: _reply_stat,
    OP_SET_ACL: _reply_stat,
    OP_CREATE: _reply_path,
    OP_SYNC: _reply_path,
    OP_CREATE2: _reply_path_stat,
    OP_CREATE_CONTAINER: _reply_path_stat,
    OP_CREATE_TTL: _reply_path_stat,
    OP_DELETE: _reply_empty,
    OP_PING: _reply_empty,
    OP_GET_CHILDREN: _reply_children1,
    OP_GET_CHILDREN2: _reply_children2,
}


class JuteEncoder:
    """One connection's replies and events as jute frames, in the order the core writes them."""

    __slots__ = ("pending", "arrivals", "multi_types", "with_read_only", "close_after", "stats", "now")

    def __init__(self, stats: ConnectionStats | None = None) -> None:
        # The opcode of each request awaiting its reply, oldest first, and when it arrived (time.monotonic);
        # a multi's op types in `multi_types`.
        self.pending: deque[int] = deque()
        self.arrivals: deque[float] = deque()
        self.multi_types: deque[list[int]] = deque()
        self.with_read_only = False
        self.close_after = False  # a reply that ends the connection was encoded (AUTHFAILED, unknown opcode)
        self.stats = stats
        # time.monotonic() of the socket write being encoded (set once per write by the sink): each
        # reply's latency is measured to it, without a clock read per reply.
        self.now = 0.0

    def expect(self, opcode: int, arrived: float, op_types: list[int] | None = None) -> None:
        """A request of `opcode` was read at `arrived`: its reply is the next one not yet expected."""
        self.pending.append(opcode)
        self.arrivals.append(arrived)
        if op_types is not None:
            self.multi_types.append(op_types)

    def encode(self, message: zk_pb2.ServerMessage, out: list[bytes]) -> int:
        """Append `message`'s frames to `out`; returns how many."""
        kind = message.WhichOneof("kind")
        if kind == "response":
            self.reply(message.response, out)
        elif kind == "event":
            self.event(message.event, out)
        elif kind == "batch":
            return sum(self.encode(inner, out) for inner in message.batch.messages)
        elif kind == "connect":
            connect = message.connect
            out.append(encode_connect(connect, self.with_read_only))
            if self.stats is not None:
                self.stats.session_id = connect.session_id
                self.stats.timeout_ms = connect.timeout_ms
        return 1

    def event(self, ev: zk_pb2.WatchEvent, out: list[bytes]) -> None:
        """Notification: ReplyHeader{-1, zxid of the change, 0} + WatcherEvent{type, state, path}."""
        raw = ev.path.encode("utf-8")
        state = ev.state or KEEPER_STATE_SYNC_CONNECTED
        out.append(_EVENT_HEADER.pack(16 + 12 + len(raw), XID_NOTIFICATION, ev.zxid, 0, ev.type, state, len(raw)))
        out.append(raw)

    def reply(self, resp: zk_pb2.Response, out: list[bytes]) -> None:
        """ReplyHeader{xid, zxid, err} and, when err is 0, the record of the request's opcode."""
        opcode = self.pending.popleft() if self.pending else OP_PING
        err = resp.err
        zxid = resp.zxid
        if self.arrivals:
            latency_ms = (self.now - self.arrivals.popleft()) * 1000
            if self.stats is not None:
                self.stats.answered(OPERATION_NAMES.get(opcode, "UNKN"), zxid, latency_ms)
        if not err:
            fast = _FAST_REPLIES.get(opcode)
            if fast is not None:
                fast(out, resp.xid, zxid, resp)
                return
        if opcode in (OP_UNKNOWN, OP_MARSHALLING_ERROR):
            self._fixed_reply(opcode, resp.xid, zxid, out)
            return
        elif opcode == OP_SASL:
            self._sasl_reply(resp, out)
            return
        elif opcode == OP_AUTH:
            zxid = 0  # ZooKeeperServer.processPacket answers auth with zxid 0
            if err:
                err = Code.AUTHFAILED
                self.close_after = True
        elif opcode in (OP_MULTI, OP_MULTI_READ):
            op_types = self.multi_types.popleft() if self.multi_types else []
            if not err:
                at = len(out)
                out.append(b"")  # the header, once the record's length is known
                _write_multi(out, op_types, resp, opcode == OP_MULTI)
                out[at] = _REPLY_HEADER.pack(16 + _length(out, at + 1), resp.xid, zxid, 0)
                return
        if err:
            out.append(_REPLY_HEADER.pack(16, resp.xid, zxid, err))
            return
        at = len(out)
        out.append(b"")
        _write_body(out, opcode, resp)
        out[at] = _REPLY_HEADER.pack(16 + _length(out, at + 1), resp.xid, zxid, 0)

    def _sasl_reply(self, resp: zk_pb2.Response, out: list[bytes]) -> None:
        """ReplyHeader{xid, 0, err} + SetSASLResponse{buffer token} (ZooKeeperServer.processSasl): a null token
        from a server without SASL and after a failed login, which then closes the connection."""
        token = resp.sasl_token if resp.HasField("sasl_token") and not resp.err else None
        size = 4 + (len(token) if token is not None else 0)
        out.append(_REPLY_HEADER.pack(16 + size, resp.xid, 0, resp.err))
        _buffer(out, token or b"", null=token is None)
        if resp.err:
            self.close_after = True

    def _fixed_reply(self, opcode: int, xid: int, zxid: int, out: list[bytes]) -> None:
        """The answers ZooKeeper gives without the core's help (the core answered an op-less request)."""
        if opcode == OP_MARSHALLING_ERROR:
            out.append(_REPLY_HEADER.pack(16, xid, zxid, Code.MARSHALLINGERROR))
        else:
            out.append(_REPLY_HEADER.pack(16, xid, zxid, Code.UNIMPLEMENTED))
            self.close_after = True


def _length(out: list[bytes], start: int) -> int:
    return sum(map(len, out[start:]))
