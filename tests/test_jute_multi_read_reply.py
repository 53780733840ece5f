"""The jute encoding of multi and multiRead replies (ZooKeeper's MultiResponse, docs/research/quorum.md §2.4).

A multi is atomic: once one op fails, every op answers an ErrorResult. A multiRead is not: each op
answers on its own, so a missing node's getData is an ErrorResult beside the other ops' data and
children (ZooKeeper's FinalRequestProcessor, OpCode.multiRead) — what ZooKeeper's Java client and
kazoo read.
"""

from __future__ import annotations

import struct

from zkemu.jute_codec import OP_GET_CHILDREN, OP_GET_DATA, OP_MULTI, OP_MULTI_READ, JuteEncoder
from zkraft_proto import zk_pb2

NONODE = -101
BADVERSION = -103
OP_CREATE = 1
OP_CHECK = 13
OP_ERROR = -1
MULTI_HEADER = struct.Struct(">i?i")


def op_headers(opcode: int, op_types: list[int], results: list[zk_pb2.OpResult]) -> list[tuple[int, int]]:
    """The (type, err) of each MultiHeader in the reply frame, skipping each op's record."""
    encoder = JuteEncoder()
    encoder.expect(opcode, 0.0, op_types)
    out: list[bytes] = []
    encoder.encode(zk_pb2.ServerMessage(response=zk_pb2.Response(xid=7, zxid=9, results=results)), out)
    frame = b"".join(out)
    length, xid, _zxid, err = struct.unpack_from(">iiqi", frame)
    assert (length, xid, err) == (len(frame) - 4, 7, 0)
    pos, headers = 20, []
    for _ in range(len(op_types) + 1):
        op_type, done, op_err = MULTI_HEADER.unpack_from(frame, pos)
        pos += MULTI_HEADER.size
        if done:
            break
        headers.append((op_type, op_err))
        pos += _record_size(frame, pos, op_type)
    return headers


def _record_size(frame: bytes, pos: int, op_type: int) -> int:
    stat_size = 68  # Stat: 6 longs and 5 ints
    if op_type == OP_ERROR:
        return 4
    if op_type == OP_GET_DATA:
        (data_length,) = struct.unpack_from(">i", frame, pos)
        return 4 + max(data_length, 0) + stat_size
    if op_type == OP_GET_CHILDREN:
        (count,) = struct.unpack_from(">i", frame, pos)
        size = 4
        for _ in range(count):
            (name_length,) = struct.unpack_from(">i", frame, pos + size)
            size += 4 + name_length
        return size
    if op_type == OP_CREATE:
        (path_length,) = struct.unpack_from(">i", frame, pos)
        return 4 + path_length
    return 0  # check: no record


def test_multi_read_answers_each_op_on_its_own() -> None:
    results = [
        zk_pb2.OpResult(data=b"m", stat=zk_pb2.Stat(version=1)),
        zk_pb2.OpResult(children=["a", "b"]),
        zk_pb2.OpResult(err=NONODE),
    ]
    headers = op_headers(OP_MULTI_READ, [OP_GET_DATA, OP_GET_CHILDREN, OP_GET_DATA], results)
    assert headers == [(OP_GET_DATA, 0), (OP_GET_CHILDREN, 0), (OP_ERROR, NONODE)]


def test_a_failed_multi_answers_error_results_only() -> None:
    results = [zk_pb2.OpResult(err=0), zk_pb2.OpResult(err=BADVERSION)]
    headers = op_headers(OP_MULTI, [OP_CREATE, OP_CHECK], results)
    assert headers == [(OP_ERROR, 0), (OP_ERROR, BADVERSION)]
