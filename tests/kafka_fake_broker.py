"""An in-memory fake of the broker service (broker.proto) for client tests without broker processes.

    with FakeKafka(brokers=2) as fake:
        fake.create_topic("t", partitions=4)          # leaders round-robin over the fake brokers
        fake.inject_produce_errors("t", 0, [6, 6])    # next two produces to t-0 answer NOT_LEADER_OR_FOLLOWER
        Producer(fake.bootstrap_servers)...

Every fake broker is a sync gRPC server on a loopback port sharing one state
under one lock: per-partition logs as lists of (base offset, batch bytes),
offsets assigned with `client.kafka.records.assign_offsets` as the real broker
does. A request for a partition the answering broker does not lead gets
NOT_LEADER_OR_FOLLOWER, so the clients' per-leader routing is checked too.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from concurrent import futures

import grpc

from client.kafka.errors import (
    InvalidReplicationFactorError,
    NotLeaderForPartitionError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from client.kafka.records import CorruptRecordError, assign_offsets, validate_batches
from tests.quorum_harness import LOOPBACK, free_ports
from zkraft_proto import broker_pb2 as pb
from zkraft_proto import broker_pb2_grpc as pb_grpc

CLUSTER_ID = "fake-cluster"
WORKERS = 8


class FakeKafka:
    def __init__(self, brokers: int = 1) -> None:
        self.broker_ids = list(range(1, brokers + 1))
        self.ports = dict(zip(self.broker_ids, free_ports(brokers), strict=True))
        self.lock = threading.Condition()
        self.topics: dict[str, dict[int, int]] = {}  # topic -> partition -> leader
        # per partition: (base offset, last offset, batch bytes), in offset order
        self.logs: dict[tuple[str, int], list[tuple[int, int, bytes]]] = defaultdict(list)
        self.produce_errors: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.produce_requests: list[pb.ProduceRequest] = []
        self.fetch_requests: list[pb.FetchRequest] = []
        self.down: set[int] = set()  # brokers that answer UNAVAILABLE
        self._servers: list[grpc.Server] = []

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{LOOPBACK}:{self.ports[b]}" for b in self.broker_ids)

    def __enter__(self) -> FakeKafka:
        for broker_id in self.broker_ids:
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS))
            pb_grpc.add_BrokerServicer_to_server(_Servicer(self, broker_id), server)
            server.add_insecure_port(f"{LOOPBACK}:{self.ports[broker_id]}")
            server.start()
            self._servers.append(server)
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.stop(grace=None)

    # ------------------------------------------------------------------ state helpers

    def create_topic(self, name: str, partitions: int = 1) -> None:
        with self.lock:
            self.topics[name] = {p: self.broker_ids[p % len(self.broker_ids)] for p in range(partitions)}

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        with self.lock:
            self.topics[topic][partition] = leader

    def inject_produce_errors(self, topic: str, partition: int, codes: list[int]) -> None:
        with self.lock:
            self.produce_errors[(topic, partition)].extend(codes)

    def end_offset(self, topic: str, partition: int) -> int:
        with self.lock:
            return self._end((topic, partition))

    def _end(self, tp: tuple[str, int]) -> int:
        log = self.logs[tp]
        return log[-1][1] + 1 if log else 0


class _Servicer(pb_grpc.BrokerServicer):
    def __init__(self, fake: FakeKafka, broker_id: int) -> None:
        self.fake = fake
        self.broker_id = broker_id

    def _check_up(self, context: grpc.ServicerContext) -> None:
        if self.broker_id in self.fake.down:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"fake broker {self.broker_id} is down")

    def _partition_error(self, topic: str, partition: int) -> int:
        leaders = self.fake.topics.get(topic)
        if leaders is None or partition not in leaders:
            return UnknownTopicOrPartitionError.code
        if leaders[partition] != self.broker_id:
            return NotLeaderForPartitionError.code
        return 0

    def Metadata(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        with f.lock:
            names = sorted(f.topics) if request.all_topics else list(request.topics)
            topics = []
            for name in names:
                leaders = f.topics.get(name)
                if leaders is None:
                    topics.append(pb.MetadataTopic(name=name, error_code=UnknownTopicOrPartitionError.code))
                    continue
                parts = [
                    pb.MetadataPartition(
                        partition_index=p, leader_id=leader, leader_epoch=0, replica_nodes=[leader], isr_nodes=[leader]
                    )
                    for p, leader in sorted(leaders.items())
                ]
                topics.append(pb.MetadataTopic(name=name, partitions=parts, is_internal=name.startswith("__")))
            brokers = [pb.MetadataBroker(node_id=b, host=LOOPBACK, port=f.ports[b]) for b in f.broker_ids]
            return pb.MetadataResponse(brokers=brokers, cluster_id=CLUSTER_ID, controller_id=1, topics=topics)

    def Produce(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        out = []
        with f.lock:
            f.produce_requests.append(request)
            for topic in request.topics:
                parts = []
                for pd in topic.partitions:
                    tp = (topic.name, pd.index)
                    code = self._partition_error(*tp)
                    injected = f.produce_errors.get(tp)
                    if code == 0 and injected:
                        code = injected.pop(0)
                    if code:
                        parts.append(pb.PartitionProduceResponse(index=pd.index, error_code=code, base_offset=-1))
                        continue
                    try:
                        buf = bytearray(pd.records)
                        info = validate_batches(buf)
                    except CorruptRecordError as exc:
                        parts.append(pb.PartitionProduceResponse(index=pd.index, error_code=2, error_message=str(exc)))
                        continue
                    base = f._end(tp)
                    assign_offsets(buf, base, 0, info)
                    for batch in info.batches:
                        start = batch.position
                        last = base + batch.last_offset_delta
                        f.logs[tp].append((base, last, bytes(buf[start : start + batch.length])))
                        base += batch.last_offset_delta + 1
                    parts.append(
                        pb.PartitionProduceResponse(
                            index=pd.index, base_offset=base - info.offset_count, log_append_time_ms=-1
                        )
                    )
                out.append(pb.TopicProduceResponse(name=topic.name, partitions=parts))
            f.lock.notify_all()
        return pb.ProduceResponse(responses=out)

    def _fetch_partition(self, tp: tuple[str, int], fp: pb.FetchPartition) -> pb.FetchPartitionData:
        f = self.fake
        code = self._partition_error(*tp)
        if code:
            return pb.FetchPartitionData(partition=fp.partition, error_code=code)
        end = f._end(tp)
        if fp.fetch_offset > end or fp.fetch_offset < 0:
            return pb.FetchPartitionData(partition=fp.partition, error_code=OffsetOutOfRangeError.code)
        chunks, size = [], 0
        log = f.logs[tp]
        first = bisect.bisect_left(log, fp.fetch_offset, key=lambda entry: entry[1])
        for _, _, batch in log[first:]:
            if chunks and size + len(batch) > fp.partition_max_bytes:
                break
            chunks.append(batch)
            size += len(batch)
        return pb.FetchPartitionData(
            partition=fp.partition, high_watermark=end, log_end_offset=end, records=b"".join(chunks)
        )

    def Fetch(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        with f.lock:
            f.fetch_requests.append(request)
            deadline_s = request.max_wait_ms / 1000.0
            for _ in range(2):  # answer now, or after waiting once for a produce
                responses = [
                    pb.FetchableTopicResponse(
                        topic=t.topic,
                        partitions=[self._fetch_partition((t.topic, p.partition), p) for p in t.partitions],
                    )
                    for t in request.topics
                ]
                if any(p.records or p.error_code for r in responses for p in r.partitions) or deadline_s <= 0:
                    break
                f.lock.wait(deadline_s)
                deadline_s = 0
            return pb.FetchResponse(responses=responses)

    def ListOffsets(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        with f.lock:
            topics = []
            for t in request.topics:
                parts = []
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    code = self._partition_error(*tp)
                    offset = 0 if p.timestamp == -2 else f._end(tp)
                    parts.append(
                        pb.ListOffsetsPartitionResponse(
                            partition_index=p.partition_index, error_code=code, offset=-1 if code else offset
                        )
                    )
                topics.append(pb.ListOffsetsTopicResponse(name=t.name, partitions=parts))
            return pb.ListOffsetsResponse(topics=topics)

    def CreateTopics(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        results = []
        with f.lock:
            for t in request.topics:
                if t.name in f.topics:
                    code, msg = TopicAlreadyExistsError.code, f"Topic '{t.name}' already exists."
                elif t.replication_factor > len(f.broker_ids):
                    code = InvalidReplicationFactorError.code
                    brokers = len(f.broker_ids)
                    msg = f"Replication factor: {t.replication_factor} larger than available brokers: {brokers}."
                else:
                    code, msg = 0, ""
                    if not request.validate_only:
                        count = t.num_partitions if t.num_partitions > 0 else 1
                        f.topics[t.name] = {p: f.broker_ids[p % len(f.broker_ids)] for p in range(count)}
                results.append(pb.CreatableTopicResult(name=t.name, error_code=code, error_message=msg))
        return pb.CreateTopicsResponse(topics=results)

    def CreatePartitions(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        results = []
        with f.lock:
            for t in request.topics:
                leaders = f.topics.get(t.name)
                if leaders is None:
                    results.append(
                        pb.CreatePartitionsTopicResult(name=t.name, error_code=3, error_message="no such topic")
                    )
                    continue
                if t.count <= len(leaders):
                    msg = (
                        f"Topic currently has {len(leaders)} partitions, which is higher than the requested {t.count}."
                    )
                    results.append(pb.CreatePartitionsTopicResult(name=t.name, error_code=37, error_message=msg))
                    continue
                if not request.validate_only:
                    for p in range(len(leaders), t.count):
                        leaders[p] = f.broker_ids[p % len(f.broker_ids)]
                results.append(pb.CreatePartitionsTopicResult(name=t.name))
        return pb.CreatePartitionsResponse(results=results)

    def DeleteTopics(self, request, context):  # noqa: N802
        self._check_up(context)
        f = self.fake
        results = []
        with f.lock:
            for name in request.topic_names:
                if f.topics.pop(name, None) is None:
                    results.append(pb.DeletableTopicResult(name=name, error_code=3, error_message="no such topic"))
                else:
                    results.append(pb.DeletableTopicResult(name=name))
        return pb.DeleteTopicsResponse(responses=results)
