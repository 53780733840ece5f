"""Disk faults of a broker, with real processes on loopback (3 quorum nodes; no root needed).

* A failed segment write (runtime.failpoints, armed while the broker runs): the broker halts with exit
  code 1 and one `log_dir_failed` line (Kafka 2.8 with its only log directory offline), the produce in
  flight is never acknowledged, and the broker restarted on a working disk serves every record it
  acknowledged at the offset it acknowledged it at.
* A torn last batch (tests/faults/torn.py): the leader SIGKILLed, its active segment cut in the middle
  of the last batch or followed by garbage, restarted: recovery cuts the tail (`log_truncated`), the
  broker rejoins the ISR, and every acknowledged record is read back.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from client import Consumer, Producer, TopicPartition
from client.kafka.errors import KafkaError
from runtime.failpoints import ENV_VAR
from tests.faults.torn import tear_kafka_segment
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "disk"
RECORDS = 500
STOP_DEADLINE_S = 20.0
READ_DEADLINE_S = 30.0
ISR_DEADLINE_S = 60.0
# The produce the failed broker never answers: given up quickly, so the test does not wait two minutes.
UNANSWERED_DELIVERY_MS = 6000
BROKER_PROPERTIES = {"replica.lag.time.max.ms": "2000"}


def produce_acknowledged(cluster: KafkaCluster, first: int = 0) -> dict[int, bytes]:
    """Offset -> value of every record the producer got an acks=all acknowledgement for."""
    producer = Producer(cluster.bootstrap_servers, acks="all", linger_ms=2)
    try:
        values = [b"v-%05d" % i for i in range(first, first + RECORDS)]
        futures = [(producer.send(TOPIC, value=value, partition=0), value) for value in values]
        producer.flush(timeout=60)
        acked = {future.get(timeout=30).offset: value for future, value in futures}
    finally:
        producer.close(timeout=30)
    assert len(acked) == RECORDS
    return acked


def produce_unanswered(cluster: KafkaCluster) -> None:
    producer = Producer(
        cluster.bootstrap_servers, acks="all", linger_ms=0,
        request_timeout_ms=UNANSWERED_DELIVERY_MS // 2, delivery_timeout_ms=UNANSWERED_DELIVERY_MS,
    )  # fmt: skip
    try:
        future = producer.send(TOPIC, value=b"after-the-failure", partition=0)
        with pytest.raises(KafkaError):
            future.get(timeout=UNANSWERED_DELIVERY_MS / 1000 + 10)
    finally:
        producer.close(timeout=5)


def read_all(cluster: KafkaCluster) -> dict[int, bytes]:
    """Offset -> value of everything a consumer reads from the beginning up to the partition's end."""
    tp = TopicPartition(TOPIC, 0)
    out: dict[int, bytes] = {}
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + READ_DEADLINE_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read stopped at {consumer.position(tp)} of {end}"
            for batch in consumer.poll(timeout_ms=500).values():
                out.update((r.offset, r.value) for r in batch)
    return out


def test_a_broker_whose_segment_write_fails_halts_and_acknowledges_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trigger = tmp_path / "disk-fault"
    with KafkaCluster(tmp_path / "cluster", brokers=1, broker_properties=BROKER_PROPERTIES) as cluster:
        cluster.quorum.start_all()  # KafkaCluster.start, with the failpoint given to the broker only
        monkeypatch.setenv(ENV_VAR, f"write=fail-if-exists:{trigger}")
        cluster.start_broker(1, wait=False)
        monkeypatch.delenv(ENV_VAR)
        cluster.wait_registered([1])
        cluster.wait_controller()
        cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
        acked = produce_acknowledged(cluster)
        trigger.touch()
        produce_unanswered(cluster)
        wait_until(lambda: not cluster.alive(1), STOP_DEADLINE_S, message="the broker halts on its failed disk")
        assert cluster._procs[1].returncode == 1, cluster.log_tail(1)
        [failed] = cluster.log_events(1, "log_dir_failed")
        assert failed["level"] == "critical" and "write failed" in failed["error"], failed
        assert "Shutdown broker because all log dirs in" in failed["message"], failed
        assert "Traceback" not in cluster.log_text(1), cluster.log_tail(1)

        trigger.unlink()
        cluster.start_broker(1)
        cluster.wait_leaders(TOPIC, 1)
        found = read_all(cluster)
        assert {offset: found.get(offset) for offset in acked} == acked


@pytest.mark.parametrize("mode", ["cut", "garbage"])
def test_a_torn_last_batch_is_cut_and_the_broker_rejoins_with_every_acknowledged_record(
    mode: str, tmp_path: Path
) -> None:
    with KafkaCluster(tmp_path, brokers=3, broker_properties=BROKER_PROPERTIES) as cluster:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3, min_insync_replicas="2")
        acked = produce_acknowledged(cluster)
        leader = cluster.partition_state(TOPIC, 0).leader
        cluster.kill_broker(leader)
        tear = tear_kafka_segment(cluster.data_dir(leader) / f"{TOPIC}-0", mode)
        assert tear.record_start_bytes >= 0, tear  # there was a last batch to tear
        acked |= produce_acknowledged(cluster, first=RECORDS)  # the others lead meanwhile
        cluster.start_broker(leader)
        wait_until(lambda: leader in cluster.partition_state(TOPIC, 0).isr, ISR_DEADLINE_S,
                   message=f"broker {leader} back in the ISR")  # fmt: skip
        [cut] = cluster.log_events(leader, "log_truncated")
        # A cut batch goes from its start; garbage starts right after the last whole batch.
        cut_from = tear.record_start_bytes if mode == "cut" else tear.offset_bytes
        assert (cut["segment"], cut["cut_from_position"]) == (tear.path.name, cut_from), cut
        found = read_all(cluster)
        assert {offset: found.get(offset) for offset in acked} == acked
