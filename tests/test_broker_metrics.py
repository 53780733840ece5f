"""A broker's /metrics as Prometheus scrapes it, on a real cluster (3 quorum nodes, 3 brokers): the JMX
exporter's Kafka names move the way a Kafka operator expects (broker/metrics.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster
from tests.quorum_harness import LOOPBACK, free_ports

pytestmark = pytest.mark.integration

HTTP_TIMEOUT_S = 10.0
RECORDS = 250


class MetricsCluster(KafkaCluster):
    """KafkaCluster whose brokers serve /metrics, each on its own port."""

    def __init__(self, root: Path, brokers: int = 3, broker_properties: dict[str, str] | None = None) -> None:
        super().__init__(root, brokers, broker_properties)
        self.metrics_ports = dict(zip(self.broker_ids, free_ports(brokers), strict=True))

    def write_config(self, broker_id: int) -> Path:
        path = super().write_config(broker_id)
        with path.open("a", encoding="utf-8") as out:
            out.write(f"metrics.host={LOOPBACK}\nmetrics.port={self.metrics_ports[broker_id]}\n")
        return path

    def url(self, broker_id: int, path: str) -> str:
        return f"http://{LOOPBACK}:{self.metrics_ports[broker_id]}{path}"


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def scrape(cluster: MetricsCluster, broker_id: int) -> Iterator[tuple[str, dict[str, str], float]]:
    status, body = http_get(cluster.url(broker_id, "/metrics"))
    assert status == 200, body
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            yield sample.name, sample.labels, sample.value


def total(cluster: MetricsCluster, broker_ids: list[int], name: str, **labels: str) -> float:
    """The sum over brokers of `name`'s samples whose labels are exactly `labels`."""
    return sum(
        value
        for broker_id in broker_ids
        for sample_name, sample_labels, value in scrape(cluster, broker_id)
        if sample_name == name and sample_labels == labels
    )


def produce(cluster: MetricsCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    failures: list[str] = []
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=lambda e, _m: e and failures.append(str(e)))
    assert producer.flush(30) == 0 and not failures, failures


def test_kafka_metrics_move_with_produce_lag_and_a_killed_broker(tmp_path: Path) -> None:
    with MetricsCluster(tmp_path, brokers=3, broker_properties={"replica.lag.time.max.ms": "3000"}) as cluster:
        cluster.start()
        everyone = cluster.broker_ids
        for broker_id in everyone:
            wait_until(lambda b=broker_id: http_get(cluster.url(b, "/readyz"))[0] == 200, 30, message="readyz")
            assert json.loads(http_get(cluster.url(broker_id, "/healthz"))[1]) == {"status": "ok"}
        cluster.create_topic("metered", partitions=1, replication_factor=3)
        before = total(cluster, everyone, "kafka_server_brokertopicmetrics_messagesin_total")
        produce(cluster, "metered", RECORDS)
        after = total(cluster, everyone, "kafka_server_brokertopicmetrics_messagesin_total")
        assert after - before == RECORDS
        assert total(cluster, everyone, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered") == RECORDS
        assert total(cluster, everyone, "kafka_log_log_logendoffset", topic="metered", partition="0") == 3 * RECORDS
        assert total(cluster, everyone, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
        assert total(cluster, everyone, "kafka_server_replicamanager_partitioncount") >= 3
        maxlag = [
            value
            for broker_id in everyone
            for name, labels, value in scrape(cluster, broker_id)
            if name == "kafka_server_replicafetchermanager_maxlag" and labels == {"clientId": "Replica"}
        ]
        assert len(maxlag) == 3 and all(lag >= 0 for lag in maxlag)

        committed = 100
        consumer = Consumer(
            {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "lagging", "enable.auto.commit": False}
        )
        try:
            consumer.commit(offsets=[KafkaTopicPartition("metered", 0, committed)], asynchronous=False)
        finally:
            consumer.close()
        lag_labels = {"consumergroup": "lagging", "topic": "metered", "partition": "0"}
        wait_until(
            lambda: total(cluster, everyone, "kafka_consumergroup_lag", **lag_labels) == RECORDS - committed,
            30,
            message="group lag is end offset minus committed offset",
        )

        assert total(cluster, everyone, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total(cluster, everyone, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        controller = cluster.wait_controller()
        victim = next(b for b in everyone if b != controller)
        cluster.kill_broker(victim)
        survivors = [b for b in everyone if b != victim]
        wait_until(
            lambda: total(cluster, survivors, "kafka_server_replicamanager_underreplicatedpartitions") >= 1,
            30,
            message="under-replicated partitions rise after SIGKILL",
        )
        assert total(cluster, survivors, "kafka_controller_kafkacontroller_activecontrollercount") == 1
