"""A broker's operations port: `/metrics` with the names the Prometheus JMX exporter's standard Kafka
configuration publishes (kafka_server_brokertopicmetrics_*, kafka_server_replicamanager_*,
kafka_controller_kafkacontroller_*, kafka_network_requestmetrics_*, kafka_server_replicafetchermanager_maxlag,
kafka_log_log_*) and kafka_exporter's kafka_consumergroup_lag; `/healthz` and `/readyz`.

Counters come from plain ints the hot paths bump (broker/broker_stats.py); gauges that need a scan
(under-replicated partitions, log sizes, group lag) are computed here at scrape time, on the event loop
(runtime.metrics_http.on_loop), so nothing on the request path pays for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from broker.broker_stats import REQUEST_STATS, BrokerTopicStats
from broker.controller.states import PartitionState
from runtime.metrics_http import Check, OpsHttpServer, check_route, on_loop, start_ops_server

BTM = "kafka_server_brokertopicmetrics_"
RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"


def _topic_families(stats: BrokerTopicStats) -> Iterator[Metric]:
    """BrokerTopicMetrics: one series per topic (label topic) and the all-topics series (no label)."""
    for field, suffix, text in (
        ("messages_in", "messagesin", "Messages appended as leader"),
        ("bytes_in", "bytesin", "Bytes appended as leader (produce)"),
        ("bytes_out", "bytesout", "Bytes fetched by consumers"),
    ):
        family = CounterMetricFamily(BTM + suffix, text, labels=["topic"])
        total = 0
        for topic, counters in stats.topics.items():
            value = getattr(counters, field)
            total += value
            family.add_metric([topic], value)
        # The exporter's all-topics series is the same name without a topic label.
        family.samples.append(Sample(f"{BTM}{suffix}_total", {}, total))
        yield family


def _replica_families(broker: Any) -> Iterator[Metric]:
    """ReplicaManager's gauges over the partitions this broker hosts (Kafka's ReplicaManager.scala)."""
    replicas = broker.replicas
    partitions = list(replicas.partitions.values())
    leading = [p for p in partitions if p.is_leader]
    yield GaugeMetricFamily(RM + "partitioncount", "Partitions hosted here", value=len(partitions))
    yield GaugeMetricFamily(RM + "leadercount", "Partitions led here", value=len(leading))
    under = sum(len(p.isr) < len(p.replicas) for p in leading)
    yield GaugeMetricFamily(RM + "underreplicatedpartitions", "Led partitions with ISR < replicas", value=under)
    yield CounterMetricFamily(RM + "isrshrinks", "ISR shrinks written as leader", value=replicas.stats.isr_shrinks)
    yield CounterMetricFamily(RM + "isrexpands", "ISR expands written as leader", value=replicas.stats.isr_expands)
    lags = broker.fetchers.lag_by_partition.values() if broker.fetchers is not None else ()
    # ReplicaFetcherManager's MaxLag carries clientId=Replica (the exporter turns it into a label).
    maxlag = GaugeMetricFamily(
        "kafka_server_replicafetchermanager_maxlag", "Largest follower lag in messages", labels=["clientId"]
    )
    maxlag.add_metric(["Replica"], max(lags, default=0))
    yield maxlag
    size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes", labels=["topic", "partition"])
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=["topic", "partition"])
    for partition in partitions:
        labels = [partition.tp.topic, str(partition.tp.partition)]
        size.add_metric(labels, partition.log.size_bytes)
        end.add_metric(labels, partition.log.log_end_offset)
    yield size
    yield end


def _controller_families(controller: Any) -> Iterator[Metric]:
    """KafkaController's gauges: only the active controller reports offline and imbalanced partitions."""
    active = controller is not None and controller.is_active
    offline = imbalance = 0
    if active:
        ctx = controller.context
        offline = sum(state is PartitionState.OFFLINE_PARTITION for state in ctx.partition_states.values())
        for tp, leadership in ctx.leadership.items():
            preferred = ctx.replicas(tp)
            imbalance += bool(preferred) and leadership.leader != preferred[0]
    yield GaugeMetricFamily(KC + "activecontrollercount", "1 on the active controller", value=int(active))
    yield GaugeMetricFamily(KC + "offlinepartitionscount", "Partitions without a leader", value=offline)
    yield GaugeMetricFamily(
        KC + "preferredreplicaimbalancecount", "Partitions not led by their preferred replica", value=imbalance
    )


def _request_families() -> Iterator[Metric]:
    """RequestMetrics by request name (label `request`, as the exporter names it)."""
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered", labels=["request"])
    total = SummaryMetricFamily("kafka_network_requestmetrics_totaltimems", "Request total time", labels=["request"])
    for name, count in REQUEST_STATS.counts.items():
        requests.add_metric([name], count)
        total.add_metric([name], count_value=count, sum_value=REQUEST_STATS.total_ns[name] / 1e6)
    yield requests
    yield total


def _group_lag_family(broker: Any) -> Iterator[Metric]:
    """kafka_exporter's kafka_consumergroup_lag: high watermark minus committed offset, for the groups this
    broker coordinates and the partitions it hosts (a partition hosted elsewhere is left out, not guessed)."""
    family = GaugeMetricFamily(
        "kafka_consumergroup_lag", "Consumer group lag", labels=["consumergroup", "topic", "partition"]
    )
    groups = getattr(broker.groups, "coordinator", None)
    if groups is not None:
        partitions = broker.replicas.partitions
        for group_id, group in list(groups.groups.items()):
            for tp, committed in group.offsets.items():
                partition = partitions.get(tp)
                if partition is not None:
                    lag = max(0, partition.high_watermark - committed.offset)
                    family.add_metric([group_id, tp.topic, str(tp.partition)], lag)
    yield family


def _scrape(broker: Any) -> list[Metric]:
    if broker.replicas is None:
        return []  # starting
    families: list[Metric] = [*_topic_families(broker.replicas.stats), *_replica_families(broker)]
    families += [*_controller_families(broker.controller), *_request_families(), *_group_lag_family(broker)]
    return families


class KafkaCollector(Collector):
    def __init__(self, broker: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._broker = broker
        self._loop = loop

    def collect(self) -> Iterator[Metric]:
        yield from on_loop(self._loop, lambda: _scrape(self._broker))


def _ready(broker: Any) -> Check:
    """Ready: registered in ZooKeeper, and every partition it follows has a fetcher (in sync or catching up)."""
    if broker.broker_epoch < 0 or broker.zk is None or not broker.zk.connected or broker.replicas is None:
        return Check(False, ("not registered",))
    fetchers = broker.fetchers
    stalled = [
        f"{p.tp.topic}-{p.tp.partition}"
        for p in broker.replicas.partitions.values()
        if not p.is_leader and p.leader >= 0 and (fetchers is None or not fetchers.is_fetching(p.tp))
    ]
    if stalled:
        return Check(False, (f"not fetching from the leader: {', '.join(sorted(stalled)[:10])}",))
    return Check(True)


def start_broker_ops(broker: Any) -> OpsHttpServer | None:
    """metrics.host:metrics.port: /metrics, /healthz, /readyz (None when metrics.port is 0).
    Called on the event loop; OSError when the port is taken."""
    config = broker.config
    if not config.metrics_port:
        return None
    loop = asyncio.get_running_loop()
    registry = CollectorRegistry()
    registry.register(KafkaCollector(broker, loop))
    routes = {
        "/healthz": check_route(lambda: Check(True), loop),
        "/readyz": check_route(lambda: _ready(broker), loop),
    }
    return start_ops_server(config.metrics_host, config.metrics_port, registry, routes)
