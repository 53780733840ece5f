"""Fuzz a live broker: malformed and extreme requests for a bounded time, then it must still serve.

One real broker on a real quorum (tests/kafka_harness.py). Hypothesis drives,
with a fixed number of examples and derandomized (the same requests on every
run, so CI is reproducible):

* random bytes as the raw payload of every gRPC method of the broker's
  services, found by listing the service descriptors and called with identity
  serializers;
* protobuf messages of every method's request type, built from the message
  descriptors, with extreme field values: int32/int64 bounds and -1, empty,
  huge and illegal strings (topic names like "..", "a/b", 300 characters),
  huge repeated fields (well inside socket.request.max.bytes), garbage bytes.

Any gRPC status is an answer (INVALID_ARGUMENT for bytes that do not parse,
an error code inside a response, ...) except UNAVAILABLE, which would mean the
broker is gone. After every example the process must be alive and its
resident memory (/proc/<pid>/status VmRSS) under RSS_BYTES_MAX; afterwards a
normal produce and fetch on a topic created before the fuzz must work.

Requests that are legal and merely expensive are tamed so that the run stays
bounded, as an operator would expect of a shared CI machine: creations of more
than a few partitions are validate_only (the bounds are checked the same
way), Metadata auto-creates at most a few topics, and no fuzzed request names
the probe topic.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.kafka.records import RecordBatchBuilder
from tests.helpers import resident_bytes
from tests.kafka_harness import KafkaCluster
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc

# The fuzz runs wherever the integration tests run (CI included): no extra marker, no environment switch.
# A failing example's repr can be large (a 200 kB string): hypothesis warns; the example is still reported.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]

PROBE_TOPIC = "fuzz-probe"  # never named by a fuzzed request
TARGET_TOPIC = "fuzz-target"  # named by fuzzed requests, alongside random names
CALL_TIMEOUT_S = 5.0
RSS_BYTES_MAX = 400 * 1024 * 1024  # a broker at rest is about 50 MB
RAW_EXAMPLES = 1000  # with MESSAGE_EXAMPLES, about 20 s of CI time; the seeds are fixed
MESSAGE_EXAMPLES = 500
FUZZ_SECONDS_MAX = 45.0  # per test; examples past it are skipped, so a slow machine still ends in time
HUGE_LIST = 20_000
HUGE_STRING = 200_000
SERVICES = [pb.DESCRIPTOR.services_by_name[name] for name in pb.DESCRIPTOR.services_by_name]
METHODS = [(f"/{service.full_name}/{method.name}", method) for service in SERVICES for method in service.methods]
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    properties = {
        "fetch.max.wait.ms.max": "1000",  # a fuzzed Fetch holds its call for a second at most
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    with KafkaCluster(tmp_path_factory.mktemp("fuzz"), brokers=1, broker_properties=properties) as kafka:
        kafka.start()
        kafka.create_topic(PROBE_TOPIC, partitions=1)
        kafka.create_topic(TARGET_TOPIC, partitions=2)
        yield kafka


@pytest.fixture(scope="module")
def channel(cluster: KafkaCluster) -> Iterator[grpc.Channel]:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(cluster.broker_address(1), options=options) as ch:
        yield ch


def call_raw(channel: grpc.Channel, path: str, payload: bytes) -> grpc.StatusCode:
    """One unary call with identity serializers; the status it ended with (OK included)."""
    method = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
    try:
        method(payload, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def check_broker(cluster: KafkaCluster, code: grpc.StatusCode, what: str) -> None:
    if not cluster.alive(1):
        raise AssertionError(f"the broker died after {what}\n{cluster.log_tail(1)}")
    assert code != grpc.StatusCode.UNAVAILABLE, f"the broker stopped answering after {what}"
    rss_bytes = resident_bytes(cluster._procs[1].pid)
    assert rss_bytes < RSS_BYTES_MAX, f"the broker grew past {RSS_BYTES_MAX} bytes after {what}"


# ---------------------------------------------------------------- strategies from the descriptors

_TOPIC_NAMES = st.one_of(
    st.sampled_from([TARGET_TOPIC, "", ".", "..", "../../escape", "a/b", "x" * 300, "\x00", "__consumer_offsets"]),
    st.text(max_size=20),
).filter(lambda name: name != PROBE_TOPIC)


def _strings(field: FieldDescriptor) -> st.SearchStrategy[str]:
    if "topic" in field.name or field.name == "name":
        return _TOPIC_NAMES
    return st.one_of(st.text(max_size=30), st.just(""), st.just("é" * HUGE_STRING))


def _integers(bounds: tuple[int, int]) -> st.SearchStrategy[int]:
    low, high = bounds
    return st.one_of(st.sampled_from([low, high, -1, 0, 1]), st.integers(low, high), st.integers(-3, 10))


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return _integers(INT32)
    if kind in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64):
        return _integers(INT64)
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return _integers((0, 2**32 - 1))
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return _integers((0, 2**64 - 1))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_STRING:
        return _strings(field)
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=200), st.just(b""), st.just(_valid_batch()), st.just(b"\xff" * 100_000))
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values])
    return st.floats(allow_nan=True)


def _field(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return st.dictionaries(_scalar(key), _scalar(value), max_size=4)
    if field.message_type is not None:
        one = _message(field.message_type, depth + 1)
    else:
        one = _scalar(field)
    if not field.is_repeated:
        return one
    lists = st.lists(one, max_size=3)
    if field.type == FieldDescriptor.TYPE_STRING:
        # A huge list of short strings (topic names, group ids), well inside the message size limit.
        short = st.sampled_from(["", TARGET_TOPIC, "a/b", "x" * 300])
        lists = st.one_of(lists, short.map(lambda item: [item] * HUGE_LIST))
    elif field.message_type is None and field.type != FieldDescriptor.TYPE_BYTES:
        # A huge repeated number (broker ids, ISR, ...).
        lists = st.one_of(lists, one.map(lambda item: [item] * HUGE_LIST))
    return lists


@functools.cache
def _message(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    cls = GetMessageClass(descriptor)
    if depth > 2:
        return st.just(cls())
    fields = {f.name: _field(f, depth) for f in descriptor.fields}
    return st.fixed_dictionaries({}, optional=fields).map(lambda values: cls(**values))


_BATCH: list[bytes] = []


def _valid_batch() -> bytes:
    if not _BATCH:
        builder = RecordBatchBuilder()
        builder.append(b"k", b"fuzz")
        _BATCH.append(builder.build())
    return _BATCH[0]


def tame(request: Message) -> Message:
    """Keep legal but expensive requests cheap (see the module's docstring); extreme values stay."""
    if isinstance(request, pb.CreateTopicsRequest):
        if any(t.num_partitions > 4 or len(t.assignments) > 4 for t in request.topics) or len(request.topics) > 2:
            request.validate_only = True
        request.timeout_ms = min(request.timeout_ms, 2000)
    elif isinstance(request, pb.CreatePartitionsRequest):
        if any(t.count > 4 for t in request.topics) or len(request.topics) > 2:
            request.validate_only = True
        request.timeout_ms = min(request.timeout_ms, 2000)
    elif isinstance(request, pb.DeleteTopicsRequest):
        request.timeout_ms = min(request.timeout_ms, 2000)
    elif isinstance(request, pb.MetadataRequest) and len(request.topics) > 3:
        request.allow_auto_topic_creation = False
    return request


_REQUESTS = st.one_of([st.tuples(st.just(path), _message(m.input_type).map(tame)) for path, m in METHODS])

# ---------------------------------------------------------------- the fuzz


class _Budget:
    """The wall-clock bound of one fuzz test: examples after it are skipped, not run."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.ran = 0
        self.codes: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []  # requests a handler failed on (INTERNAL), for the assertion's message

    def spent(self) -> bool:
        return time.monotonic() - self.started > FUZZ_SECONDS_MAX


_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


def test_random_bytes_on_every_method(cluster: KafkaCluster, channel: grpc.Channel) -> None:
    budget = _Budget()

    @settings(_SETTINGS, max_examples=RAW_EXAMPLES)
    @given(method=st.sampled_from([path for path, _ in METHODS]), payload=st.binary(max_size=4096))
    def fuzz(method: str, payload: bytes) -> None:
        if budget.spent():
            return
        budget.ran += 1
        code = call_raw(channel, method, payload)
        budget.codes[code.name] += 1
        check_broker(cluster, code, f"{len(payload)} random bytes to {method}")

    fuzz()
    assert budget.ran >= min(RAW_EXAMPLES, 50)
    # Bytes that do not parse are refused with one line; some random bytes parse (every proto3 field is optional).
    assert budget.codes["INVALID_ARGUMENT"] > 0 and budget.codes["OK"] > 0, budget.codes
    print(f"fuzzed {budget.ran} payloads in {time.monotonic() - budget.started:.1f} s: {dict(budget.codes)}")
    assert_still_serves(cluster, channel)


def test_extreme_messages_on_every_method(cluster: KafkaCluster, channel: grpc.Channel) -> None:
    budget = _Budget()

    @settings(_SETTINGS, max_examples=MESSAGE_EXAMPLES)
    @given(request=_REQUESTS)
    def fuzz(request: tuple[str, Message]) -> None:
        if budget.spent():
            return
        budget.ran += 1
        method, message = request
        payload = message.SerializeToString()
        code = call_raw(channel, method, payload)
        budget.codes[code.name] += 1
        if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
            budget.failures.append(str(message)[:300])
        check_broker(cluster, code, f"{type(message).__name__} of {len(payload)} bytes to {method}")

    fuzz()
    assert budget.ran >= min(MESSAGE_EXAMPLES, 50)
    assert budget.codes["OK"] >= budget.ran // 2, budget.codes  # mostly answered, errors inside the responses
    # A message that parses is answered with Kafka's error codes, never by a handler's unexpected exception.
    assert budget.codes["INTERNAL"] == budget.codes["UNKNOWN"] == 0, (budget.codes, budget.failures)
    print(f"fuzzed {budget.ran} messages in {time.monotonic() - budget.started:.1f} s: {dict(budget.codes)}")
    assert_still_serves(cluster, channel)


def assert_still_serves(cluster: KafkaCluster, channel: grpc.Channel) -> None:
    """A normal produce to the probe topic, then a fetch that returns it."""
    stub = broker_pb2_grpc.BrokerStub(channel)
    produce = pb.ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        topics=[pb.TopicProduceData(name=PROBE_TOPIC, partitions=[pb.PartitionProduceData(records=_valid_batch())])],
    )
    (written,) = stub.Produce(produce, timeout=30).responses[0].partitions
    assert written.error_code == 0 and written.base_offset >= 0, written
    partition = pb.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=written.base_offset)
    fetch = pb.FetchRequest(
        replica_id=-1, max_wait_ms=0, topics=[pb.FetchTopic(topic=PROBE_TOPIC, partitions=[partition])]
    )
    (read,) = (
        pb.FetchResponse.FromString(
            channel.unary_unary("/zkraft.broker.Broker/Fetch", request_serializer=None, response_deserializer=None)(
                fetch.SerializeToString(), timeout=30
            )
        )
        .responses[0]
        .partitions
    )
    assert read.error_code == 0 and b"fuzz" in read.records
    assert cluster.alive(1) and resident_bytes(cluster._procs[1].pid) < RSS_BYTES_MAX
