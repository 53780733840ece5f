"""How a node reads its session streams off the wire: jute.maxbuffer checked before a message is parsed.

The gRPC server's own receive limit is the Raft peers' (they share the port
and send batches of megabytes, quorum.transport), so the ZooKeeper service
registers its Session method with a deserializer of its own: it sees the
message's length first, and a message over jute.maxbuffer (plus the stream
envelope) is never parsed: the stream ends, as ZooKeeper closes the
connection of a packet over jute.maxbuffer (NIOServerCnxn.readLength: "Len
error"; BinaryInputArchive.checkLength). Bytes that do not parse end the
stream too (ZooKeeper closes the connection of a request it cannot
deserialize). The length also tells the service how many bytes each request
holds in flight (zkemu.admission) at no cost per request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from runtime.message_limits import ENVELOPE_BYTES_MAX
from zkraft_proto import zk_pb2

SERVICE_NAME = "zkraft.zk.ZooKeeper"


class Refused:
    """A session-stream message that is not read: why, and the status the stream ends with."""

    __slots__ = ("problem", "size_bytes", "status")

    def __init__(self, size_bytes: int, problem: str, status: grpc.StatusCode) -> None:
        self.size_bytes = size_bytes
        self.problem = problem
        self.status = status


# One session-stream message as read: (its length in bytes, the message), or why it was not read.
# A plain tuple: it is made for every message (a NamedTuple cost 2 µs more, more than the parse).
Received = tuple[int, zk_pb2.ClientMessage] | Refused


def session_message_reader(jute_max_buffer_bytes: int) -> Callable[[bytes], Received]:
    limit_bytes = jute_max_buffer_bytes + ENVELOPE_BYTES_MAX
    parse = zk_pb2.ClientMessage.FromString

    def read(raw: bytes) -> Received:
        size_bytes = len(raw)
        if size_bytes > limit_bytes:
            problem = (
                f"a stream message of {size_bytes} bytes exceeds jute.maxbuffer ({jute_max_buffer_bytes} bytes "
                f"and {ENVELOPE_BYTES_MAX} of envelope)"
            )
            return Refused(size_bytes, problem, grpc.StatusCode.RESOURCE_EXHAUSTED)
        try:
            return size_bytes, parse(raw)
        except DecodeError as exc:
            problem = f"a stream message of {size_bytes} bytes is not a ClientMessage: {exc}"
            return Refused(size_bytes, problem, grpc.StatusCode.INVALID_ARGUMENT)

    return read


def add_service(servicer: Any, server: grpc.aio.Server, jute_max_buffer_bytes: int) -> None:
    """zk_pb2_grpc.add_ZooKeeperServicer_to_server, with Session's messages read by `session_message_reader`."""
    handlers = {
        "Session": grpc.stream_stream_rpc_method_handler(
            servicer.Session,
            request_deserializer=session_message_reader(jute_max_buffer_bytes),
            response_serializer=zk_pb2.ServerMessage.SerializeToString,
        ),
        "Forward": grpc.stream_stream_rpc_method_handler(
            servicer.Forward,
            request_deserializer=zk_pb2.ForwardRequest.FromString,
            response_serializer=zk_pb2.ForwardResponse.SerializeToString,
        ),
        "TouchSessions": grpc.unary_unary_rpc_method_handler(
            servicer.TouchSessions,
            request_deserializer=zk_pb2.TouchSessionsRequest.FromString,
            response_serializer=zk_pb2.TouchSessionsResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
