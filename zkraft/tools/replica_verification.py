"""`zkraft replica-verification`: Kafka's `kafka-replica-verification.sh` (`kafka.tools.ReplicaVerificationTool`).

    zkraft replica-verification --broker-list H:P[,H:P] [--topic-white-list REGEX] [--report-interval-ms N]
        [--max-wait-ms N] [--fetch-size N] [--time -1|-2|TS] [--time-limit-ms N]

Research/kafka.md §6.4. Every replica of every matching partition is fetched from its broker
with replica id -2 (the debug id: a follower serves it too, up to its log end), and the batches
of all replicas are compared in step, offset by offset, each replica up to its own high
watermark, as ReplicaBuffer.verifyCheckSum does. Kafka's lines:

    2026-11-21 13:30:00,123: verification process is started.
    2026-11-21 13:30:30,456: max lag is 0 for partition t-0 at offset 100 among 3 partitions
    2026-11-21 13:30:30,456: partition t-0 has unmatched checksum at offset 7; replica 1's checksum 123; ...
    2026-11-21 13:30:30,456: partition t-0: replica 1's offset 7 doesn't match replica 2's offset 9   (exit 1)

Lag is the largest high watermark among a partition's replicas minus the offset up to which all
replicas were found equal; the line names the partition with the largest lag. Verification starts
at `--time` (-1, the default: the latest offset, so only records produced from now on are checked;
-2: the earliest). A broker that does not answer contributes an empty fetch, as in Kafka, and so
holds back its partitions' verified offset.

Ours: `--time-limit-ms` stops after that long (Kafka's tool runs until killed), printing the
report line once more on the way out.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TextIO

from client.kafka.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, RecordsError, read_batch_header
from client.kafka.structs import TopicPartition
from zkraft.tools.topics import EXIT_FAILURE, EXIT_OK, ToolError, ToolUsageError

DEBUG_REPLICA_ID = -2  # Kafka's Request.DebuggingConsumerId
CONSUMER_REPLICA_ID = -1
LATEST_TIME = -1
EARLIEST_TIME = -2
FETCH_SIZE_DEFAULT = 1024 * 1024  # ConsumerConfig max.partition.fetch.bytes
MAX_WAIT_MS_DEFAULT = 1000
REPORT_INTERVAL_MS_DEFAULT = 30_000
RPC_SLACK_S = 10.0  # added to --max-wait-ms for a fetch's deadline (Kafka: socket timeout 30 s)
METADATA_TIMEOUT_S = 10.0
ROUND_BACKOFF_S = 0.05  # after a round in which no broker answered, so a dead cluster does not spin


@dataclass(frozen=True, slots=True)
class VerificationOptions:
    brokers: tuple[str, ...]
    topic_white_list: str = ".*"
    fetch_size: int = FETCH_SIZE_DEFAULT
    max_wait_ms: int = MAX_WAIT_MS_DEFAULT
    initial_offset_time: int = LATEST_TIME
    report_interval_ms: int = REPORT_INTERVAL_MS_DEFAULT
    time_limit_ms: int | None = None


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker-list", metavar="H:P,...", help="brokers to get metadata from (required)")
    parser.add_argument("--fetch-size", type=int, default=FETCH_SIZE_DEFAULT, help="bytes per partition per fetch")
    parser.add_argument(
        "--max-wait-ms", type=int, default=MAX_WAIT_MS_DEFAULT, help="longest a fetch waits for data (default 1000)"
    )
    parser.add_argument("--topic-white-list", default=".*", metavar="REGEX", help="topics to verify (default .*)")
    parser.add_argument(
        "--time", type=int, default=LATEST_TIME, help="where to start: -1 latest (default), -2 earliest, or a time"
    )
    parser.add_argument(
        "--report-interval-ms", type=int, default=REPORT_INTERVAL_MS_DEFAULT, help="between lag reports (30000)"
    )
    parser.add_argument("--time-limit-ms", type=int, default=None, help="stop after this long (default: never)")


def options_from_namespace(ns: argparse.Namespace) -> VerificationOptions:
    from zkraft.tools.quorum_status import ServerListError, parse_server_list

    if ns.broker_list is None:
        raise ToolUsageError('Missing required argument "[broker-list]"')
    try:
        brokers = parse_server_list(ns.broker_list)
    except ServerListError:
        raise ToolUsageError("Please provide valid host:port like host1:9091,host2:9092") from None
    for flag, value, low in (
        ("--fetch-size", ns.fetch_size, 1),
        ("--max-wait-ms", ns.max_wait_ms, 0),
        ("--report-interval-ms", ns.report_interval_ms, 0),
    ):
        if value < low:
            raise ToolUsageError(f"{flag} must be >= {low}, got {value}")
    if ns.time_limit_ms is not None and ns.time_limit_ms < 0:
        raise ToolUsageError(f"--time-limit-ms must be >= 0, got {ns.time_limit_ms}")
    from zkraft.tools.topics import topic_filter

    topic_filter(ns.topic_white_list)  # a bad regex fails here, with Kafka's message
    return VerificationOptions(
        brokers=tuple(brokers),
        topic_white_list=ns.topic_white_list,
        fetch_size=ns.fetch_size,
        max_wait_ms=ns.max_wait_ms,
        initial_offset_time=ns.time,
        report_interval_ms=ns.report_interval_ms,
        time_limit_ms=ns.time_limit_ms,
    )


def time_string(epoch_ms: int) -> str:
    """SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSS") in local time."""
    seconds, millis = divmod(epoch_ms, 1000)
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(seconds))},{millis:03d}"


# ---------------------------------------------------------------- verification (pure)


class BatchInfo(NamedTuple):
    last_offset: int
    checksum: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


@dataclass(frozen=True, slots=True)
class ReplicaData:
    """One replica's answer for one partition: its high watermark and the batches fetched."""

    high_watermark: int
    batches: tuple[BatchInfo, ...] = ()


INVALID_HIGH_WATERMARK = -1
EMPTY = ReplicaData(INVALID_HIGH_WATERMARK)


def batch_infos(records: bytes) -> tuple[BatchInfo, ...]:
    """Last offset and stored CRC of each whole batch (a partial batch at the end is ignored).

    Kafka compares `batch.checksum`, the stored CRC, without decompressing; so do we.
    """
    out: list[BatchInfo] = []
    pos = 0
    while len(records) - pos >= BATCH_HEADER_SIZE:
        header = read_batch_header(records, pos)
        size = header.batch_length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE:
            raise RecordsError(f"batch at position {pos}: batchLength {header.batch_length} too short")
        if pos + size > len(records):
            break
        out.append(BatchInfo(header.last_offset, header.crc))
        pos += size
    return tuple(out)


class OffsetMismatch(Exception):
    """Two replicas disagree on where a batch ends: Kafka prints the line and exits 1."""


@dataclass
class ReplicaBuffer:
    """Kafka's ReplicaBuffer: the verified offset per partition and the lag report."""

    expected_replicas: Mapping[TopicPartition, int]
    fetch_offsets: dict[TopicPartition, int]
    report_interval_ms: int
    last_report_ms: int
    max_lag: int = -1
    offset_with_max_lag: int = -1
    max_lag_partition: TopicPartition | None = None
    verified_rounds: int = 0
    lines: list[str] = field(default_factory=list)

    def verify(self, fetched: Mapping[TopicPartition, Mapping[int, ReplicaData]], now_ms: int) -> list[str]:
        """verifyCheckSum: compare the replicas of every partition; the lines to print (mismatches, report).

        Raises OffsetMismatch (its message is the line) when two replicas' batches end at different offsets.
        """
        out: list[str] = []
        self.max_lag = -1
        for tp in sorted(fetched):
            per_replica = fetched[tp]
            if len(per_replica) != self.expected_replicas[tp]:
                raise AssertionError(
                    f"fetched {len(per_replica)} replicas for {tp}, but expected {self.expected_replicas[tp]} replicas"
                )
            out += self._verify_partition(tp, per_replica, now_ms)
            max_hw = max(r.high_watermark for r in per_replica.values())
            offset = self.fetch_offsets[tp]
            if max_hw - offset > self.max_lag:
                self.offset_with_max_lag = offset
                self.max_lag = max_hw - offset
                self.max_lag_partition = tp
        self.verified_rounds += 1
        if now_ms - self.last_report_ms > self.report_interval_ms:
            out.append(self.report_line(now_ms))
            self.last_report_ms = now_ms
        return out

    def _verify_partition(self, tp: TopicPartition, per_replica: Mapping[int, ReplicaData], now_ms: int) -> list[str]:
        out: list[str] = []
        iterators = {replica: iter(data.batches) for replica, data in sorted(per_replica.items())}
        while True:
            first: tuple[int, BatchInfo] | None = None
            in_all = True
            for replica, batches in iterators.items():
                batch = next(batches, None)
                if batch is None or batch.last_offset >= per_replica[replica].high_watermark:
                    in_all = False
                    continue
                if first is None:
                    first = (replica, batch)
                    continue
                first_replica, first_batch = first
                if first_batch.last_offset != batch.last_offset:
                    raise OffsetMismatch(
                        f"{time_string(now_ms)}: partition {tp}: replica {first_replica}'s offset "
                        f"{first_batch.last_offset} doesn't match replica {replica}'s offset {batch.last_offset}"
                    )
                if first_batch.checksum != batch.checksum:
                    out.append(
                        f"{time_string(now_ms)}: partition {tp} has unmatched checksum at offset "
                        f"{batch.last_offset}; replica {first_replica}'s checksum {first_batch.checksum}; "
                        f"replica {replica}'s checksum {batch.checksum}"
                    )
            if not in_all or first is None:
                return out
            self.fetch_offsets[tp] = first[1].next_offset

    def report_line(self, now_ms: int) -> str:
        return (
            f"{time_string(now_ms)}: max lag is {self.max_lag} for partition {self.max_lag_partition} "
            f"at offset {self.offset_with_max_lag} among {len(self.expected_replicas)} partitions"
        )


# ---------------------------------------------------------------- the cluster


@dataclass(frozen=True, slots=True)
class ClusterView:
    addresses: Mapping[int, str]  # broker id -> host:port
    replicas: Mapping[TopicPartition, tuple[int, ...]]
    leaders: Mapping[TopicPartition, int]


def select_partitions(metadata: Any, white_list: str) -> ClusterView:
    """The matching topics of a MetadataResponse (internal ones included, as Kafka's tool does)."""
    from zkraft.tools.topics import topic_filter

    allowed = topic_filter(white_list)
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    replicas: dict[TopicPartition, tuple[int, ...]] = {}
    leaders: dict[TopicPartition, int] = {}
    for topic in metadata.topics:
        if topic.error_code != 0 or not allowed.fullmatch(topic.name):
            continue
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            replicas[tp] = tuple(partition.replica_nodes)
            leaders[tp] = partition.leader_id
    return ClusterView(addresses, dict(sorted(replicas.items())), leaders)


def partitions_by_broker(view: ClusterView) -> dict[int, list[TopicPartition]]:
    out: dict[int, list[TopicPartition]] = {}
    for tp, replicas in view.replicas.items():
        for broker in replicas:
            out.setdefault(broker, []).append(tp)
    return dict(sorted(out.items()))


class Channels:
    """One gRPC channel and stub per address; closed together."""

    def __init__(self) -> None:
        self._channels: dict[str, Any] = {}
        self._stubs: dict[str, Any] = {}

    def stub(self, address: str) -> Any:
        import grpc

        from client.kafka.cluster import GRPC_OPTIONS
        from zkraft_proto import broker_pb2_grpc

        if address not in self._stubs:
            channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
            self._channels[address] = channel
            self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
        return self._stubs[address]

    def close(self) -> None:
        for channel in self._channels.values():
            with contextlib.suppress(Exception):
                channel.close()


def fetch_metadata(channels: Channels, brokers: Sequence[str]) -> Any:
    import grpc

    from zkraft_proto import broker_pb2

    failures: list[str] = []
    for address in brokers:
        try:
            return channels.stub(address).Metadata(
                broker_pb2.MetadataRequest(all_topics=True), timeout=METADATA_TIMEOUT_S
            )
        except grpc.RpcError as error:
            failures.append(f"{address}: {error.code().name}")
    raise ToolError(f"Fetching topic metadata failed from every broker in --broker-list ({'; '.join(failures)})")


def initial_offsets(channels: Channels, view: ClusterView, when: int) -> dict[TopicPartition, int]:
    """ListOffsets at `when` from each partition's leader (a consumer's view: LATEST is the high watermark)."""
    import grpc

    from zkraft_proto import broker_pb2

    by_leader: dict[int, list[TopicPartition]] = {}
    for tp, leader in view.leaders.items():
        by_leader.setdefault(leader, []).append(tp)
    offsets: dict[TopicPartition, int] = {}
    for leader, tps in sorted(by_leader.items()):
        if leader < 0 or leader not in view.addresses:
            raise ToolError(f"partition {tps[0]} has no leader; cannot find its starting offset")
        request = broker_pb2.ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID)
        for topic in sorted({tp.topic for tp in tps}):
            item = request.topics.add(name=topic)
            for tp in (t for t in tps if t.topic == topic):
                item.partitions.add(partition_index=tp.partition, current_leader_epoch=-1, timestamp=when)
        try:
            response = channels.stub(view.addresses[leader]).ListOffsets(request, timeout=METADATA_TIMEOUT_S)
        except grpc.RpcError as error:
            raise ToolError(f"ListOffsets to broker {leader} failed: {error.code().name}") from None
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                if part.error_code != 0:
                    raise ToolError(f"cannot find the starting offset of {tp}: error code {part.error_code}")
                offsets[tp] = part.offset if part.offset >= 0 else 0
    missing = [tp for tp in view.replicas if tp not in offsets]
    if missing:
        raise ToolError(f"no starting offset for {missing[0]}")
    return offsets


def fetch_round(
    channels: Channels,
    view: ClusterView,
    by_broker: Mapping[int, Sequence[TopicPartition]],
    offsets: Mapping[TopicPartition, int],
    options: VerificationOptions,
) -> tuple[dict[TopicPartition, dict[int, ReplicaData]], int]:
    """One Fetch per broker, all in flight together; (data per partition per replica, brokers that answered)."""
    import grpc

    from zkraft_proto import broker_pb2

    futures = {}
    for broker, tps in by_broker.items():
        request = broker_pb2.FetchRequest(
            replica_id=DEBUG_REPLICA_ID, max_wait_ms=options.max_wait_ms, min_bytes=1, max_bytes=0
        )
        for topic in sorted({tp.topic for tp in tps}):
            item = request.topics.add(topic=topic)
            for tp in (t for t in tps if t.topic == topic):
                item.partitions.add(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=offsets[tp],
                    log_start_offset=-1,
                    partition_max_bytes=options.fetch_size,
                )
        address = view.addresses.get(broker)
        if address is not None:
            futures[broker] = channels.stub(address).Fetch.future(
                request, timeout=options.max_wait_ms / 1000 + RPC_SLACK_S
            )
    fetched: dict[TopicPartition, dict[int, ReplicaData]] = {tp: {} for tp in view.replicas}
    answered = 0
    for broker, tps in by_broker.items():
        results: dict[TopicPartition, ReplicaData] = {}
        future = futures.get(broker)
        if future is not None:
            try:
                response = future.result()
                answered += 1
                results = _replica_data(response)
            except grpc.RpcError:
                results = {}
        for tp in tps:
            fetched[tp][broker] = results.get(tp, EMPTY)
    return fetched, answered


def _replica_data(response: Any) -> dict[TopicPartition, ReplicaData]:
    out: dict[TopicPartition, ReplicaData] = {}
    for topic in response.responses:
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, part.partition)
            if part.error_code != 0:
                out[tp] = ReplicaData(part.high_watermark if part.high_watermark >= 0 else INVALID_HIGH_WATERMARK)
                continue
            out[tp] = ReplicaData(part.high_watermark, batch_infos(part.records))
    return out


def verify_loop(
    options: VerificationOptions,
    out: TextIO,
    clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    rounds_max: int | None = None,
) -> int:
    channels = Channels()
    try:
        view = select_partitions(fetch_metadata(channels, options.brokers), options.topic_white_list)
        if not view.replicas:
            raise ToolError(
                "No topics found. --topic-white-list if specified, is either filtering out all topics or there is "
                "no topic."
            )
        by_broker = partitions_by_broker(view)
        offsets = initial_offsets(channels, view, options.initial_offset_time)
        expected = {tp: len(replicas) for tp, replicas in view.replicas.items()}
        buffer = ReplicaBuffer(expected, offsets, options.report_interval_ms, clock_ms())
        _emit(out, f"{time_string(clock_ms())}: verification process is started.")
        return _rounds(channels, view, by_broker, buffer, options, out, clock_ms, rounds_max)
    finally:
        channels.close()


def _rounds(
    channels: Channels,
    view: ClusterView,
    by_broker: Mapping[int, Sequence[TopicPartition]],
    buffer: ReplicaBuffer,
    options: VerificationOptions,
    out: TextIO,
    clock_ms: Callable[[], int],
    rounds_max: int | None,
) -> int:
    started_ms = clock_ms()
    for _round in _bounded(rounds_max):
        if options.time_limit_ms is not None and clock_ms() - started_ms >= options.time_limit_ms:
            break
        fetched, answered = fetch_round(channels, view, by_broker, buffer.fetch_offsets, options)
        try:
            for line in buffer.verify(fetched, clock_ms()):
                _emit(out, line)
        except OffsetMismatch as mismatch:
            _emit(out, str(mismatch))
            return EXIT_FAILURE
        if answered == 0:
            time.sleep(ROUND_BACKOFF_S)  # every broker is unreachable: do not spin (not a synchronisation)
    if buffer.verified_rounds:
        _emit(out, buffer.report_line(clock_ms()))
    return EXIT_OK


def _bounded(rounds_max: int | None) -> Iterator[int]:
    n = 0
    while rounds_max is None or n < rounds_max:
        yield n
        n += 1


def _emit(out: TextIO, line: str) -> None:
    out.write(line + "\n")
    out.flush()


def run(ns: argparse.Namespace, out: TextIO | None = None) -> int:
    options = options_from_namespace(ns)
    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    try:
        return verify_loop(options, out if out is not None else sys.stdout)
    except RecordsError as error:
        raise ToolError(f"bad record batch in a fetch response: {error}") from None
