"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and InitProducerId: the record path.

Each handler translates a Kafka request into the replica manager's own request (the one the gRPC front end
sends), and its answer back; acks, min.insync.replicas, the idempotent producer's sequences, the delayed
produce and fetch, leader epochs all live below, once. Records stay whole batches as bytes both ways: a
produced batch is appended as it came (compressed or not), a fetched one is the segment's bytes; only batch
headers are ever read here (a few bytes at fixed positions), never a record.

What only the Kafka wire has is decided here: Produce v3+'s one-batch rule and zstd only from v7 (Kafka 2.8
ProduceRequest.validateRecords), acks=0 answering nothing or closing the connection, fetch sessions (always
declined, so every fetch is a full fetch: Kafka's FetchSession.scala lets a broker decline), aborted
transactions (none: there are no transactions, so READ_COMMITTED reads up to the high watermark).
"""

from __future__ import annotations

import struct
from typing import Any

from broker.kafka_api.authorization import allowed, authorizer_of, cluster_allowed, topics_refused
from broker.kafka_api.entities import build, millis
from broker.kafka_api.fetch_encoding import encode_fetch_response
from broker.kafka_api.registry import CloseConnection, KafkaRequestContext, kafka_api
from broker.log import LogError
from broker.producer_ids import init_producer_id
from client.kafka import errors
from client.kafka.acls import AclOperation, ResourceType
from client.kafka.structs import TopicPartition
from zkraft_proto import broker_pb2 as pb

NONE = errors.NONE
NOT_LEADER = errors.NotLeaderForPartitionError.code
UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.code
TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.code
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = errors.TransactionalIdAuthorizationFailedError.code

# Record batch v2 header positions (docs/research/kafka.md §3.8): batchLength int32 at 8 counts the bytes
# after it, magic int8 at 16, attributes int16 at 21 (bits 0-2 the codec).
_BATCH_LENGTH = struct.Struct(">i")
_BATCH_LENGTH_POSITION = 8
_LOG_OVERHEAD_BYTES = 12  # baseOffset + batchLength
_MAGIC_POSITION = 16
_ATTRIBUTES_POSITION = 21
_CODEC_MASK = 0x07
_TRANSACTIONAL_FLAG = 0x10
_ZSTD = 4
_ZSTD_MIN_PRODUCE_VERSION = 7  # KIP-110: older produce versions may not carry zstd
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_POSITION = 43  # after lastOffsetDelta, firstTimestamp and maxTimestamp; -1 without a producer id

# Fetch sessions (KIP-227; Kafka 2.8 FetchSession.scala / FetchMetadata.java).
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# A fetch's replica id on this listener: consumers (-1) and the debug consumer (-2) only; followers replicate
# over the broker's gRPC service, so any other id is read as a consumer's (it can never move a high watermark).
CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2
READ_COMMITTED = 1
NO_PREFERRED_READ_REPLICA = -1
# Kafka's "unknown" values for a partition that answers an error (Kafka 2.8 ReplicaManager.readFromLocalLog).
UNKNOWN_OFFSET = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


# ---------------------------------------------------------------- Produce


@kafka_api(0, "Produce", 3, 9)
async def produce(request: Any, ctx: KafkaRequestContext) -> Any:
    """Kafka 2.8 KafkaApis.handleProduceRequest over ReplicaManager.produce. acks=0 answers nothing, or closes
    the connection when a partition failed (the producer then refreshes its metadata)."""
    refused, topics = _partitions_to_append(request, ctx.api_version)
    if authorizer_of(ctx) is not None:
        _refuse_unauthorized_produce(ctx, request, refused, topics)
    results: dict[tuple[str, int], pb.PartitionProduceResponse] = {}
    if topics:
        answer = await ctx.service.replicas.produce(
            pb.ProduceRequest(
                acks=request.acks,
                timeout_ms=millis(request.timeout),
                client_id=ctx.client_id or "",
                topics=[pb.TopicProduceData(name=name, partitions=parts) for name, parts in topics.items()],
            )
        )
        for topic_answer in answer.responses:
            for result in topic_answer.partitions:
                results[(topic_answer.name, result.index)] = result
    responses = [
        {
            "name": topic.name,
            "partition_responses": [
                _partition_produce_response(ctx, topic.name, data.index, refused, results)
                for data in topic.partition_data
            ],
        }
        for topic in request.topic_data
    ]
    if request.acks == 0:
        _answer_nothing_or_close(responses)
        return None
    return build(ctx.response_type, responses=responses, throttle_time=0)


def _partitions_to_append(
    request: Any, version: int
) -> tuple[dict[tuple[str, int], tuple[int, str]], dict[str, list[pb.PartitionProduceData]]]:
    """(refused partitions with their error, the rest by topic for the replica manager). A transactional batch
    without a transactional id refuses the whole request, as Kafka 2.8 answers it with one error."""
    refused: dict[tuple[str, int], tuple[int, str]] = {}
    topics: dict[str, list[pb.PartitionProduceData]] = {}
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records or b""
            problem = _produce_records_problem(version, records, request.transactional_id)
            if problem is None:
                topics.setdefault(topic.name, []).append(pb.PartitionProduceData(index=data.index, records=records))
                continue
            refused[(topic.name, data.index)] = problem
            if problem[0] == errors.TransactionalIdAuthorizationFailedError.code:
                everything = {(t.name, d.index): problem for t in request.topic_data for d in t.partition_data}
                return everything, {}
    return refused, topics


def _refuse_unauthorized_produce(
    ctx: KafkaRequestContext,
    request: Any,
    refused: dict[tuple[str, int], tuple[int, str]],
    topics: dict[str, list[pb.PartitionProduceData]],
) -> None:
    """Kafka 2.8 KafkaApis.handleProduceRequest's checks, moving refused partitions from `topics` to `refused`:
    a transactional id needs Write on it, an idempotent producer IdempotentWrite on the Cluster (each refuses
    the whole request), then every topic needs Write (TOPIC_AUTHORIZATION_FAILED on its partitions)."""
    whole: tuple[int, str] | None = None
    if request.transactional_id is not None and not allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        whole = TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed."
    elif _has_idempotent_batch(topics) and not cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE):
        whole = CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    denied = (
        {t.name for t in request.topic_data}
        if whole
        else topics_refused(ctx, AclOperation.WRITE, (t.name for t in request.topic_data))
    )
    for topic in request.topic_data:
        if topic.name in denied:
            topics.pop(topic.name, None)
            for data in topic.partition_data:
                refused[(topic.name, data.index)] = whole or (TOPIC_AUTHORIZATION_FAILED, "")


def _has_idempotent_batch(topics: dict[str, list[pb.PartitionProduceData]]) -> bool:
    """ProduceRequest.hasIdempotentRecords: a batch carrying a producer id (the first batch's header)."""
    for parts in topics.values():
        for part in parts:
            records = part.records
            if len(records) >= _PRODUCER_ID_POSITION + _PRODUCER_ID.size:
                if _PRODUCER_ID.unpack_from(records, _PRODUCER_ID_POSITION)[0] >= 0:
                    return True
    return False


def _produce_records_problem(version: int, records: bytes, transactional_id: str | None) -> tuple[int, str] | None:
    """Kafka 2.8 ProduceRequest.validateRecords, from the first batch's header: v3+ carries exactly one batch of
    magic 2, and zstd only from v7. An empty or short buffer is left to the log, which refuses it by name.

    A transactional batch without a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka 2.8's
    KafkaApis.handleProduceRequest answers it. With an id it goes to the log as the gRPC front end sends it:
    no producer can hold a transactional producer id here (InitProducerId refuses transactional ids)."""
    if len(records) < _ATTRIBUTES_POSITION + 2:
        return None
    if transactional_id is None and records[_ATTRIBUTES_POSITION + 1] & _TRANSACTIONAL_FLAG:
        return errors.TransactionalIdAuthorizationFailedError.code, (
            "a transactional record batch needs the request's transactional id"
        )
    if records[_MAGIC_POSITION] != 2:
        return errors.InvalidRecordError.code, (
            f"Produce requests with version {version} are only allowed to contain record batches with magic version 2"
        )
    if version < _ZSTD_MIN_PRODUCE_VERSION and records[_ATTRIBUTES_POSITION + 1] & _CODEC_MASK == _ZSTD:
        return errors.UnsupportedCompressionTypeError.code, (
            f"Produce requests with version {version} are not allowed to use ZStandard compression"
        )
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, _BATCH_LENGTH_POSITION)
    if 0 <= batch_length < len(records) - _LOG_OVERHEAD_BYTES:
        return errors.InvalidRecordError.code, (
            f"Produce requests with version {version} are only allowed to contain exactly one record batch"
        )
    return None


def _partition_produce_response(
    ctx: KafkaRequestContext,
    topic: str,
    index: int,
    refused: dict[tuple[str, int], tuple[int, str]],
    results: dict[tuple[str, int], pb.PartitionProduceResponse],
) -> dict[str, Any]:
    problem = refused.get((topic, index))
    if problem is not None:
        code, message = problem
        return {
            "index": index,
            "error_code": code,
            "base_offset": -1,
            "record_errors": (),
            "error_message": message or None,
        }
    result = results[(topic, index)]
    code = _not_hosted_code(ctx, topic, index, result.error_code)
    return {
        "index": index,
        "error_code": code,
        "base_offset": result.base_offset,
        "log_append_time": result.log_append_time_ms,
        "log_start_offset": result.log_start_offset if code == NONE else -1,
        "record_errors": (),
        "error_message": result.error_message or None,
    }


def _not_hosted_code(ctx: KafkaRequestContext, topic: str, partition: int, code: int) -> int:
    """Kafka 2.8 ReplicaManager.getPartitionOrError: a partition this broker does not host but the cluster has is
    NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and finds the leader), not an unknown partition."""
    if code == UNKNOWN_TOPIC_OR_PARTITION and ctx.service.metadata_cache.partition_state(topic, partition) is not None:
        return NOT_LEADER
    return code


def _answer_nothing_or_close(responses: list[dict[str, Any]]) -> None:
    failed = [
        f"{topic['name']}-{p['index']}: {errors.error_for(p['error_code']).__class__.__name__}"
        for topic in responses
        for p in topic["partition_responses"]
        if p["error_code"] != NONE
    ]
    if failed:
        raise CloseConnection("produce with acks=0 failed on " + ", ".join(failed))


# ---------------------------------------------------------------- Fetch


@kafka_api(1, "Fetch", 4, 12)
async def fetch(request: Any, ctx: KafkaRequestContext) -> Any:
    """Kafka 2.8 KafkaApis.handleFetchRequest over ReplicaManager.fetch (its delayed fetch waits for min_bytes
    up to max_wait_ms). A session is never created: session id 0 answers a request to create one (the broker
    may decline), and an incremental fetch in a session finds none (FETCH_SESSION_ID_NOT_FOUND)."""
    session_epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    if session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return build(
            ctx.response_type,
            throttle_time=0,
            error_code=errors.FetchSessionIdNotFoundError.code,
            session_id=INVALID_SESSION_ID,
            responses=(),
        )
    # Kafka 2.8: a consumer's fetch needs Read on each topic; the others are fetched, these answer the error.
    refused = topics_refused(ctx, AclOperation.READ, (t.topic for t in request.topics))
    wanted = [t for t in request.topics if t.topic not in refused] if refused else list(request.topics)
    answered: list[Any] = []
    records: dict[tuple[int, int], bytes] = {}
    if wanted:
        reply = await ctx.service.replicas.fetch(_replica_fetch_request(request, wanted))
        answered, records = list(reply.response.responses), reply.records
    aborted = () if request.isolation_level == READ_COMMITTED else None
    topics = [
        (
            topic.topic,
            [
                _partition_answer(ctx, topic.topic, item, part, records.get((t, p), b""), aborted)
                for p, (item, part) in enumerate(zip(asked.partitions, topic.partitions, strict=True))
            ],
        )
        for t, (asked, topic) in enumerate(zip(wanted, answered, strict=True))
    ]
    for asked in request.topics:
        if asked.topic in refused:
            topics.append((asked.topic, [_unauthorized_fetch(item.partition) for item in asked.partitions]))
    top = {"throttle_time": 0, "error_code": NONE, "session_id": INVALID_SESSION_ID}
    return encode_fetch_response(ctx.response_type, top, topics)


def _unauthorized_fetch(partition: int) -> tuple[dict[str, Any], bytes]:
    return (
        {
            "partition_index": partition,
            "error_code": TOPIC_AUTHORIZATION_FAILED,
            "high_watermark": UNKNOWN_OFFSET,
            "last_stable_offset": UNKNOWN_OFFSET,
            "log_start_offset": UNKNOWN_OFFSET,
            "aborted_transactions": None,
            "preferred_read_replica": NO_PREFERRED_READ_REPLICA,
        },
        b"",
    )


def _replica_fetch_request(request: Any, topics: list[Any]) -> pb.FetchRequest:
    replica_id = DEBUG_REPLICA_ID if request.replica_id == DEBUG_REPLICA_ID else CONSUMER_REPLICA_ID
    return pb.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=millis(request.max_wait),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=request.isolation_level,
        topics=[
            pb.FetchTopic(
                topic=topic.topic,
                partitions=[
                    pb.FetchPartition(
                        partition=item.partition,
                        current_leader_epoch=getattr(item, "current_leader_epoch", -1),
                        fetch_offset=item.fetch_offset,
                        log_start_offset=-1,
                        partition_max_bytes=item.partition_max_bytes,
                    )
                    for item in topic.partitions
                ],
            )
            for topic in topics
        ],
    )


def _partition_answer(
    ctx: KafkaRequestContext,
    topic: str,
    item: Any,
    part: pb.FetchPartitionData,
    records: bytes,
    aborted: tuple[()] | None,
) -> tuple[dict[str, Any], bytes]:
    """A partition's fields (without records) and its records; a fetch naming its last fetched epoch (v12+) is
    checked for a diverged log first (the answer then carries where the epoch ends here, and no records)."""
    if part.error_code != NONE:
        return _fetch_error_data(ctx, topic, part.partition, part.error_code), b""
    fields = {
        "partition_index": part.partition,
        "error_code": NONE,
        "high_watermark": part.high_watermark,
        "last_stable_offset": part.last_stable_offset,
        "log_start_offset": part.log_start_offset,
        "aborted_transactions": aborted,
        "preferred_read_replica": NO_PREFERRED_READ_REPLICA,
    }
    last_fetched_epoch = getattr(item, "last_fetched_epoch", -1)
    if last_fetched_epoch < 0:
        return fields, records
    try:
        diverged = ctx.service.replicas.diverging_epoch(
            TopicPartition(topic, part.partition), last_fetched_epoch, item.fetch_offset
        )
    except LogError as exc:
        return _fetch_error_data(ctx, topic, part.partition, exc.error_code), b""
    if diverged is None:
        return fields, records
    return fields | {"diverging_epoch": {"epoch": diverged.leader_epoch, "end_offset": diverged.end_offset}}, b""


def _fetch_error_data(ctx: KafkaRequestContext, topic: str, partition: int, code: int) -> dict[str, Any]:
    """Kafka 2.8 ReplicaManager.readFromLocalLog: an erroring partition answers unknown offsets, no records."""
    return {
        "partition_index": partition,
        "error_code": _not_hosted_code(ctx, topic, partition, code),
        "high_watermark": UNKNOWN_OFFSET,
        "last_stable_offset": UNKNOWN_OFFSET,
        "log_start_offset": UNKNOWN_OFFSET,
        "aborted_transactions": None,
        "preferred_read_replica": NO_PREFERRED_READ_REPLICA,
    }


# ---------------------------------------------------------------- ListOffsets


@kafka_api(2, "ListOffsets", 1, 6)
async def list_offsets(request: Any, ctx: KafkaRequestContext) -> Any:
    """Earliest (-2), latest (-1: the high watermark for a consumer, which is also the last stable offset as
    there are no transactions) and by timestamp (the first offset whose timestamp is >= it, with that
    timestamp); Kafka 2.8 Partition.fetchOffsetForTimestamp. Each topic needs Describe."""
    refused = topics_refused(ctx, AclOperation.DESCRIBE, (t.name for t in request.topics))
    answer = ctx.service.replicas.list_offsets(
        pb.ListOffsetsRequest(
            replica_id=request.replica_id,
            isolation_level=getattr(request, "isolation_level", 0),
            topics=[
                pb.ListOffsetsTopic(
                    name=topic.name,
                    partitions=[
                        pb.ListOffsetsPartition(
                            partition_index=item.partition_index,
                            current_leader_epoch=getattr(item, "current_leader_epoch", -1),
                            timestamp=item.timestamp,
                        )
                        for item in topic.partitions
                    ],
                )
                for topic in request.topics
                if topic.name not in refused
            ],
        )
    )
    topics = [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": item.partition_index,
                    "error_code": _not_hosted_code(ctx, topic.name, item.partition_index, item.error_code),
                    "timestamp": item.timestamp,
                    "offset": item.offset,
                    "leader_epoch": item.leader_epoch if item.error_code == NONE else -1,
                }
                for item in topic.partitions
            ],
        }
        for topic in answer.topics
    ]
    topics += [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": item.partition_index,
                    "error_code": TOPIC_AUTHORIZATION_FAILED,
                    "timestamp": -1,
                    "offset": UNKNOWN_OFFSET,
                    "leader_epoch": -1,
                }
                for item in topic.partitions
            ],
        }
        for topic in request.topics
        if topic.name in refused
    ]
    return build(ctx.response_type, throttle_time=0, topics=topics)


# ---------------------------------------------------------------- OffsetForLeaderEpoch


@kafka_api(23, "OffsetForLeaderEpoch", 2, 4)
async def offset_for_leader_epoch(request: Any, ctx: KafkaRequestContext) -> Any:
    """KIP-101/KIP-279/KIP-320: the end offset of the requested epoch on the leader, fenced by the client's
    current leader epoch (FENCED_LEADER_EPOCH older, UNKNOWN_LEADER_EPOCH newer). Each topic needs Describe."""
    refused = topics_refused(ctx, AclOperation.DESCRIBE, (t.topic for t in request.topics))
    answer = ctx.service.replicas.offset_for_leader_epoch(
        pb.OffsetForLeaderEpochRequest(
            replica_id=getattr(request, "replica_id", CONSUMER_REPLICA_ID),
            topics=[
                pb.OffsetForLeaderTopic(
                    topic=topic.topic,
                    partitions=[
                        pb.OffsetForLeaderPartition(
                            partition=item.partition,
                            current_leader_epoch=item.current_leader_epoch,
                            leader_epoch=item.leader_epoch,
                        )
                        for item in topic.partitions
                    ],
                )
                for topic in request.topics
                if topic.topic not in refused
            ],
        )
    )
    topics = [
        {
            "topic": topic.topic,
            "partitions": [
                {
                    "error_code": _not_hosted_code(ctx, topic.topic, item.partition, item.error_code),
                    "partition": item.partition,
                    "leader_epoch": item.leader_epoch,
                    "end_offset": item.end_offset,
                }
                for item in topic.partitions
            ],
        }
        for topic in answer.topics
    ]
    topics += [
        {
            "topic": topic.topic,
            "partitions": [
                {
                    "error_code": TOPIC_AUTHORIZATION_FAILED,
                    "partition": item.partition,
                    "leader_epoch": -1,
                    "end_offset": UNKNOWN_OFFSET,
                }
                for item in topic.partitions
            ],
        }
        for topic in request.topics
        if topic.topic in refused
    ]
    return build(ctx.response_type, throttle_time=0, topics=topics)


# ---------------------------------------------------------------- InitProducerId


@kafka_api(22, "InitProducerId", 0, 4)
async def init_producer_id_api(request: Any, ctx: KafkaRequestContext) -> Any:
    """Kafka 2.8 KafkaApis.handleInitProducerIdRequest: a producer id and epoch given must come together
    (INVALID_REQUEST otherwise), an empty transactional id is INVALID_REQUEST; the rest is shared with the gRPC
    front end (broker/producer_ids.py: a fresh id for an idempotent producer, transactions unsupported)."""
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    producer_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH) or request.transactional_id == "":
        return build(ctx.response_type, throttle_time=0, error_code=errors.InvalidRequestError.code, producer_epoch=-1)
    refusal = _init_producer_id_refusal(ctx, request.transactional_id)
    if refusal is not None:
        return build(ctx.response_type, throttle_time=0, error_code=refusal, producer_id=-1, producer_epoch=-1)
    result = await init_producer_id(ctx.service.producer_ids, request.transactional_id, ctx.service.logger)
    return build(
        ctx.response_type,
        throttle_time=0,
        error_code=result.error_code,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


def _init_producer_id_refusal(ctx: KafkaRequestContext, transactional_id: str | None) -> int | None:
    """Kafka 2.8 handleInitProducerIdRequest: Write on the transactional id, else IdempotentWrite on the Cluster."""
    if authorizer_of(ctx) is None:
        return None
    if transactional_id is not None:
        if allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None if cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) else CLUSTER_AUTHORIZATION_FAILED
