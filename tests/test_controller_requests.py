"""Pure parts of the controller: request batching (one RPC per broker per event, Kafka's order) and the
state-change log's Kafka 2.x line format (docs/research/kafka.md §2.10, §2.18)."""

from __future__ import annotations

import re
from pathlib import Path

from broker.controller.channel import RequestBatch
from broker.controller.context import ControllerContext, LiveBroker
from broker.controller.election import LeaderAndIsr
from broker.state_change_log import StateChangeLogger, leader_and_isr_text, log4j_timestamp
from client.kafka import znodes as kz
from client.kafka.structs import TopicPartition


def _context() -> ControllerContext:
    ctx = ControllerContext()
    ctx.epoch = 3
    for broker_id, czxid in ((1, 100), (2, 200), (3, 300)):
        endpoint = kz.EndPoint(f"h{broker_id}", 9090 + broker_id, "PLAINTEXT", "PLAINTEXT")
        ctx.add_live_brokers([LiveBroker(kz.BrokerRegistration(broker_id, (endpoint,), rack="r1"), czxid)])
    ctx.set_assignment("t", {p: (p % 3 + 1, (p + 1) % 3 + 1) for p in range(8)})
    return ctx


def test_a_batch_sends_one_leader_and_isr_per_broker_then_update_metadata_then_stop_replica() -> None:
    ctx = _context()
    batch = RequestBatch()
    for tp in ctx.all_partitions():
        replicas = ctx.replicas(tp)
        state = LeaderAndIsr.initial(replicas[0], replicas, ctx.epoch)
        ctx.leadership[tp] = state
        batch.add_leader_and_isr(replicas, tp, state, replicas, True, ctx.live_broker_ids)
    batch.add_stop_replica(3, TopicPartition("t", 1), delete=False)

    requests = batch.build(controller_id=1, ctx=ctx)
    kinds = [(type(r).__name__, broker) for broker, r in requests]
    assert kinds == [
        ("LeaderAndIsrRequest", 1), ("LeaderAndIsrRequest", 2), ("LeaderAndIsrRequest", 3),
        ("UpdateMetadataRequest", 1), ("UpdateMetadataRequest", 2), ("UpdateMetadataRequest", 3),
        ("StopReplicaRequest", 3),
    ]  # fmt: skip
    lai = dict(requests[:3])
    assert [s.partition_index for s in lai[2].partition_states] == [0, 1, 3, 4, 6, 7]
    assert lai[2].broker_epoch == 200 and lai[2].controller_epoch == 3
    assert {leader.broker_id for leader in lai[2].live_leaders} == {1, 2}  # only the leaders it is told about
    um = requests[3][1]
    assert len(um.partition_states) == 8
    assert [(b.id, b.host, b.port, b.rack) for b in um.live_brokers] == [
        (1, "h1", 9091, "r1"), (2, "h2", 9092, "r1"), (3, "h3", 9093, "r1")
    ]  # fmt: skip


def test_offline_replicas_are_reported_in_update_metadata() -> None:
    ctx = _context()
    tp = TopicPartition("t", 1)  # replicas (2, 3)
    ctx.leadership[tp] = LeaderAndIsr(2, 1, (2,), 3, 1)
    ctx.remove_live_brokers([3])
    batch = RequestBatch()
    batch.add_update_metadata(ctx.live_broker_ids, [tp])
    (_, um), _ = batch.build(1, ctx)
    assert list(um.partition_states[0].offline_replicas) == [3]


def test_state_change_log_lines_are_kafka_2x(tmp_path: Path) -> None:
    log = StateChangeLogger(tmp_path / "state-change.log", 1, clock=lambda: 1_700_000_000.123)
    state = LeaderAndIsr.initial(1, (1, 2), 3)
    log.controller(
        3, f"Changed partition t-0 from NewPartition to OnlinePartition with state {leader_and_isr_text(state)}"
    )
    log.broker("Received LeaderAndIsr request", level="TRACE")
    log.close()
    first, second = (tmp_path / "state-change.log").read_text().splitlines()
    stamp = log4j_timestamp(1_700_000_000.123)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,123", stamp)
    assert first == (
        f"[{stamp}] INFO [Controller id=1 epoch=3] Changed partition t-0 from NewPartition to OnlinePartition "
        "with state LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0) (state.change.logger)"
    )
    assert second == f"[{stamp}] TRACE [Broker id=1] Received LeaderAndIsr request (state.change.logger)"


def test_state_change_log_threshold(tmp_path: Path) -> None:
    log = StateChangeLogger(tmp_path / "s.log", 2, level="INFO")
    log.controller(1, "trace line", level="TRACE")
    log.controller(1, "info line")
    log.close()
    assert "trace line" not in (tmp_path / "s.log").read_text()
    assert "info line" in (tmp_path / "s.log").read_text()
