"""The pieces behind a node's request bounds, alone: the in-flight counts, the heap release after a
burst, the session-stream reader's jute.maxbuffer check and the multi checks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from quorum.server import server_options
from quorum.settings import NodeSettings, SettingsError, load_node_settings
from quorum.transport import GRPC_MESSAGE_BYTES_MAX
from runtime.message_limits import ENVELOPE_BYTES_MAX
from zkemu.admission import RELEASE_AFTER_BYTES, Admission
from zkemu.errors import Code
from zkemu.forward_stream import _parts_under
from zkemu.request_checks import write_problem
from zkemu.session_intake import Refused, session_message_reader
from zkraft_proto import zk_pb2


def _settings(**overrides: int) -> NodeSettings:
    return NodeSettings(node_id=1, data_dir=Path("unused"), listen="127.0.0.1:7001", peers={1: "127.0.0.1:7001"},
                        **overrides)  # fmt: skip


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_the_node_is_over_its_bounds_only_above_them() -> None:
    admission = Admission(_settings(global_outstanding_limit=10, global_outstanding_bytes_max=1000))
    admission.take(10, 1000)
    assert not admission.over  # at the limit, like ZooKeeper's `limit < inProcess`
    admission.take(1, 0)
    assert admission.over
    admission.give_back(1, 0)
    admission.take(0, 1)
    assert admission.over
    admission.give_back(10, 1001)
    assert (admission.requests, admission.bytes) == (0, 0)


def test_paused_streams_are_woken_when_the_node_goes_below_its_bounds() -> None:
    async def scenario() -> None:
        admission = Admission(_settings(global_outstanding_limit=2))
        admission.take(4, 40)
        waiting, gone = asyncio.Event(), asyncio.Event()
        admission.wait_below(waiting)
        admission.wait_below(gone)
        admission.forget(gone)  # that stream ended meanwhile
        admission.give_back(1, 10)
        assert not waiting.is_set()  # 3 in flight: still over
        admission.give_back(1, 10)
        assert waiting.is_set() and not gone.is_set()

    asyncio.run(scenario())


def test_the_heap_is_released_once_after_a_burst_and_a_quiet_period() -> None:
    clock = FakeClock()
    released: list[bool] = []
    admission = Admission(_settings(memory_release_quiet_ms=1000), lambda: released.append(True) or True, clock)
    admission.take(5, RELEASE_AFTER_BYTES)
    clock.now_s += 5
    assert not admission.release_if_quiet()  # requests still in flight
    admission.give_back(5, RELEASE_AFTER_BYTES)
    clock.now_s += 0.5
    assert not admission.release_if_quiet()  # not quiet for long enough
    clock.now_s += 0.6
    assert admission.release_if_quiet()
    assert released == [True]
    clock.now_s += 10
    assert not admission.release_if_quiet()  # nothing read since: no second trim
    admission.take(1, 100)
    admission.give_back(1, 100)
    clock.now_s += 10
    assert not admission.release_if_quiet()  # a few small requests are no burst
    assert released == [True]


def test_the_session_stream_reader_refuses_before_parsing() -> None:
    read = session_message_reader(4096)
    ok = zk_pb2.ClientMessage(request=zk_pb2.Request(xid=7, ping=zk_pb2.PingRequest())).SerializeToString()
    received = read(ok)
    assert not isinstance(received, Refused)
    assert received[0] == len(ok) and received[1].request.xid == 7
    big = read(b"\x00" * (4096 + ENVELOPE_BYTES_MAX + 1))
    assert isinstance(big, Refused) and big.status is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "exceeds jute.maxbuffer (4096 bytes" in big.problem
    at_limit = read(b"\x0a\x00" * ((4096 + ENVELOPE_BYTES_MAX) // 2))  # the limit is jute + envelope
    assert not isinstance(at_limit, Refused)
    garbage = read(b"\xff\xff\xff")
    assert isinstance(garbage, Refused) and garbage.status is grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a ClientMessage" in garbage.problem


def test_a_multi_with_an_empty_op_is_a_marshalling_error_naming_the_op() -> None:
    multi = zk_pb2.MultiOp(ops=[zk_pb2.Op(check=zk_pb2.CheckOp(path="/")), zk_pb2.Op()])
    assert write_problem("multi", multi) == (
        Code.MARSHALLINGERROR,
        "multi op 1 has no operation set (Invalid type of op)",
    )
    assert write_problem("multi", zk_pb2.MultiOp()) is None  # an empty multi is valid in ZooKeeper
    big = zk_pb2.MultiOp(ops=[zk_pb2.Op(set_data=zk_pb2.SetDataOp(path="/p", data=b"x" * ((1 << 20) + 1)))])
    problem = write_problem("multi", big)
    assert problem is not None and problem[0] == Code.BADARGUMENTS and "1048577 bytes for /p" in problem[1]
    assert write_problem("create", zk_pb2.CreateOp(path="/p", data=b"x")) is None


@pytest.mark.parametrize(
    ("key", "value", "field", "expected"),
    [
        ("jute.maxbuffer", "0xfffff", "jute_max_buffer_bytes", 1048575),
        ("jute.maxbuffer", "4194304", "jute_max_buffer_bytes", 4194304),
        ("globalOutstandingLimit", "2000", "global_outstanding_limit", 2000),
        ("session.outstanding.bytes.max", "1048576", "session_outstanding_bytes_max", 1048576),
        ("snapshot.interval.bytes", "1000000", "snapshot_interval_bytes", 1000000),
    ],
)
def test_the_bounds_are_named_settings(tmp_path: Path, key: str, value: str, field: str, expected: int) -> None:
    config = tmp_path / "node.properties"
    config.write_text(f"id=1\ndataDir={tmp_path}\nserver.1=127.0.0.1:7001\n{key}={value}\n", encoding="utf-8")
    assert getattr(load_node_settings(None, config), field) == expected


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("jute.maxbuffer", "100", "jute.maxbuffer: must be >= 4096, got 100"),
        ("globalOutstandingLimit", "0", "globalOutstandingLimit: must be >= 1, got 0"),
        ("memory.release.quiet.ms", "x", "memory.release.quiet.ms: expected an integer, got 'x'"),
    ],
)
def test_a_bad_bound_is_refused_with_its_name(tmp_path: Path, key: str, value: str, message: str) -> None:
    config = tmp_path / "node.properties"
    config.write_text(f"id=1\ndataDir={tmp_path}\nserver.1=127.0.0.1:7001\n{key}={value}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=message):
        load_node_settings(None, config)


def test_a_nodes_grpc_receive_limit_fits_a_session_message_of_jute_maxbuffer() -> None:
    def receive_limit(settings: NodeSettings) -> object:
        return dict(server_options(settings))["grpc.max_receive_message_length"]

    assert receive_limit(_settings()) == GRPC_MESSAGE_BYTES_MAX  # the Raft peers' batches need more than 1 MiB
    assert receive_limit(_settings(jute_max_buffer_bytes=100 << 20)) == (100 << 20) + ENVELOPE_BYTES_MAX
    with pytest.raises(SettingsError, match="jute.maxbuffer: must be <= 1073741824"):
        _settings(jute_max_buffer_bytes=2**31)


def test_a_followers_forward_batch_is_cut_under_the_message_limit_in_order() -> None:
    batch: Any = ["a", "b", "c", "d", "e"]  # stand-ins for (txn, future): only their order matters here
    raws = [b"x" * 10, b"x" * 10, b"x" * 30, b"x" * 5, b"x" * 5]
    parts = _parts_under(batch, raws, 20)
    assert [part for part, _ in parts] == [["a", "b"], ["c"], ["d", "e"]]  # the 30-byte write goes alone
    assert [len(b"".join(r)) for _, r in parts] == [20, 30, 10]
    assert _parts_under(batch, raws, 60) == [(batch, raws)]
