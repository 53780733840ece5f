"""A bare ZooKeeper wire-protocol (jute) client for tests of the protocol's edges: it sends exactly the
bytes a test gives and reads frames back, which kazoo cannot (kazoo sends no SetWatches, addWatch,
checkWatches, multiRead, and nothing malformed).

    with WireClient.connect("127.0.0.1:2181") as wire:
        xid = wire.send(OP_GET_DATA, ustring("/a") + boolean(False))
        header, body = wire.reply()
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from zkemu import jute_codec as jute

READ_TIMEOUT_S = 10.0
XID_NOTIFICATION = -1
STAT_BYTES = 68
STAT = struct.Struct(">qqqqiiiqiiq")


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


def boolean(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def ustring(text: str) -> bytes:
    raw = text.encode("utf-8")
    return int32(len(raw)) + raw


def buffer(raw: bytes) -> bytes:
    return int32(len(raw)) + raw


def strings(items: list[str]) -> bytes:
    return int32(len(items)) + b"".join(ustring(item) for item in items)


def connect_request(
    session_id: int = 0, password: bytes = bytes(16), last_zxid: int = 0, read_only: bool = True
) -> bytes:
    body = struct.pack(">iqiq", 0, last_zxid, 10000, session_id) + buffer(password)
    return body + (b"\x00" if read_only else b"")


def frame(payload: bytes) -> bytes:
    return int32(len(payload)) + payload


class Reply:
    """One server frame after the handshake: ReplyHeader and the record's bytes."""

    def __init__(self, payload: bytes) -> None:
        self.xid, self.zxid, self.err = struct.unpack_from(">iqi", payload, 0)
        self.body = payload[16:]
        self.pos = 0

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.body, self.pos)
        self.pos += 4
        return int(value)

    def bytes(self) -> bytes:
        size = self.int()
        value = self.body[self.pos : self.pos + max(size, 0)]
        self.pos += max(size, 0)
        return value

    def string(self) -> str:
        return self.bytes().decode("utf-8")

    def strings(self) -> list[str]:
        return [self.string() for _ in range(self.int())]

    def stat(self) -> tuple[int, ...]:
        value = STAT.unpack_from(self.body, self.pos)
        self.pos += STAT_BYTES
        return tuple(value)

    def event(self) -> tuple[int, int, str]:
        """WatcherEvent{type, state, path} of a notification."""
        return self.int(), self.int(), self.string()

    def __repr__(self) -> str:
        return f"Reply(xid={self.xid}, zxid={self.zxid}, err={self.err}, body={self.body!r})"


class WireClient:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.xid = 0
        self.session_id = 0
        self.password = b""
        self.timeout_ms = 0
        self.events: list[Reply] = []  # notifications read while waiting for a reply

    @classmethod
    def open(cls, address: str) -> WireClient:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=READ_TIMEOUT_S)
        return cls(sock)

    @classmethod
    def connect(cls, address: str, **connect_kwargs: Any) -> WireClient:
        client = cls.open(address)
        client.sock.sendall(frame(connect_request(**connect_kwargs)))
        payload = client.read_frame()
        _, client.timeout_ms, client.session_id = struct.unpack_from(">iiq", payload, 0)
        client.password = payload[20 : 20 + struct.unpack_from(">i", payload, 16)[0]]
        return client

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, opcode: int, record: bytes = b"", xid: int | None = None) -> int:
        if xid is None:
            self.xid += 1
            xid = self.xid
        self.sock.sendall(frame(struct.pack(">ii", xid, opcode) + record))
        return xid

    def read_exactly(self, size: int) -> bytes:
        chunks = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while size > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply in time")
            chunk = self.sock.recv(size)
            if not chunk:
                raise EOFError("the server closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        (length,) = struct.unpack(">i", self.read_exactly(4))
        return self.read_exactly(length)

    def reply(self) -> Reply:
        """The next reply that is not a notification (notifications go to `events`)."""
        for _ in range(10_000):
            reply = Reply(self.read_frame())
            if reply.xid != XID_NOTIFICATION:
                return reply
            self.events.append(reply)
        raise AssertionError("10000 notifications and no reply")

    def event(self) -> Reply:
        """The next notification (one read while waiting for a reply first)."""
        if self.events:
            return self.events.pop(0)
        reply = Reply(self.read_frame())
        assert reply.xid == XID_NOTIFICATION, reply
        return reply

    def call(self, opcode: int, record: bytes = b"", xid: int | None = None) -> Reply:
        sent = self.send(opcode, record, xid)
        reply = self.reply()
        assert reply.xid == sent, (reply, sent)
        return reply

    def closed_by_server(self) -> bool:
        """True once the server has closed the connection (EOF), reading and dropping what comes first."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if not self.sock.recv(65536):
                    return True
            except ConnectionResetError:
                return True
        return False


__all__ = ["WireClient", "Reply", "jute"]
