"""Replicas that lost acknowledged data (issue 25, item 1): detection, claim, and the controller's rules.

The rules are pure functions (broker/controller/election.py) tested as tables;
detection is tested on real log directories; the cluster behaviour is in
tests/test_damaged_segment_cluster.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.controller.channel import RequestBatch
from broker.controller.context import ControllerContext, LiveBroker
from broker.controller.damaged_replicas import DamagedReplicaHandler
from broker.controller.election import (
    DAMAGED_MAY_LEAD,
    ISR_FROM_ELIGIBLE,
    NO_LEADER,
    NOT_IN_ISR,
    REMOVED_FROM_ISR,
    ElectionResult,
    LeaderAndIsr,
    apply_election,
    damaged_replica_decision,
    next_eligible_leader_replicas,
    offline_partition_leader,
    remove_replica_from_isr,
)
from broker.controller.states import PartitionState as PState
from broker.damaged_logs import (
    RECOVERY_CUT,
    ClaimDataError,
    LostData,
    decode_claim,
    encode_claim,
    find_lost_data,
    merge_claims,
)
from broker.log import LogConfig, OffsetCheckpointFile
from broker.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from broker.log_manager import LogManager
from client.kafka import znodes as kz
from client.kafka.structs import TopicPartition
from client.kafka.znodes import PartitionState, decode_partition_state, encode_partition_state
from tests.test_partition_log import RecordingLogger, fill, open_log

ASSIGNMENT = (1, 2, 3)
MIN_ISR = 2


def state(leader: int, isr: tuple[int, ...], eligible: tuple[int, ...] = ()) -> LeaderAndIsr:
    return LeaderAndIsr(leader, 4, isr, 2, 9, eligible)


# --- KIP-966 eligible leader replicas ------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "old_isr", "new_isr", "old_eligible", "min_isr", "expected"),
    [
        ("shrink_still_at_min_isr", (1, 2, 3), (1, 2), (), 2, ()),
        ("shrink_below_min_isr", (1, 2), (1,), (), 2, (2,)),
        ("keeps_earlier_eligible", (1, 3), (1,), (2,), 2, (2, 3)),
        ("expand_back_to_min_isr_clears", (1,), (1, 2), (3,), 2, ()),
        ("expand_still_below_min_isr_drops_members", (1,), (1, 2), (2, 3), 3, (3,)),
        ("leader_leaving_is_eligible_too", (3, 1), (1,), (), 2, (3,)),
        ("min_isr_one_never_eligible", (1, 2), (1,), (), 1, ()),
        ("no_duplicates", (1, 2), (1,), (2,), 2, (2,)),
    ],
)
def test_next_eligible_leader_replicas(
    case: str,
    old_isr: tuple[int, ...],
    new_isr: tuple[int, ...],
    old_eligible: tuple[int, ...],
    min_isr: int,
    expected: tuple[int, ...],
) -> None:
    assert next_eligible_leader_replicas(old_isr, new_isr, old_eligible, min_isr) == expected, case


@pytest.mark.parametrize(
    ("case", "current", "replica", "min_isr", "isr", "eligible"),
    [
        ("without_min_isr_eligible_carried", state(1, (1, 2, 3), (4,)), 3, None, (1, 2), (4,)),
        ("still_enough", state(1, (1, 2, 3)), 3, 2, (1, 2), ()),
        ("below_min_isr", state(1, (1, 2)), 2, 2, (1,), (2,)),
        ("last_member_kept", state(1, (1,), (2,)), 1, 2, (1,), (2,)),
    ],
)
def test_remove_replica_from_isr_keeps_the_eligible_replicas(
    case: str,
    current: LeaderAndIsr,
    replica: int,
    min_isr: int | None,
    isr: tuple[int, ...],
    eligible: tuple[int, ...],
) -> None:
    new = remove_replica_from_isr(current, replica, 3, min_isr)
    assert new is not None
    assert (new.isr, new.eligible) == (isr, eligible), case


def test_an_unclean_election_clears_the_eligible_replicas() -> None:
    current = state(NO_LEADER, (1,), (2,))
    unclean = apply_election(current, ElectionResult(3, (3,), True, (2, 3)), 3)
    assert unclean.eligible == ()
    clean = apply_election(current, ElectionResult(1, (1,), False, (1, 2)), 3)
    assert clean.eligible == (2,)


def test_partition_state_znode_carries_the_eligible_replicas_only_when_there_are_some() -> None:
    plain = PartitionState(1, 4, (1, 2), 2)
    assert b"eligible" not in encode_partition_state(plain)
    with_elr = PartitionState(1, 4, (1,), 2, (2, 3))
    assert decode_partition_state("t", 0, encode_partition_state(with_elr)) == with_elr
    kafka_written = b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}'
    assert decode_partition_state("t", 0, kafka_written) == plain


@pytest.mark.parametrize(
    ("case", "isr", "live", "unclean", "excluded", "leader"),
    [
        ("clean_pick_unaffected", (2, 3), {1, 2, 3}, True, {2}, 2),
        ("unclean_skips_the_damaged", (2, 3), {1}, True, {1}, None),
        ("unclean_takes_the_next", (3,), {1, 2}, True, {1}, 2),
        ("unclean_off", (3,), {1, 2}, False, (), None),
    ],
)
def test_offline_partition_leader_never_picks_a_damaged_replica_uncleanly(
    case: str, isr: tuple[int, ...], live: set[int], unclean: bool, excluded: set[int], leader: int | None
) -> None:
    assert offline_partition_leader(ASSIGNMENT, isr, live, unclean, excluded) == leader, case


# --- the damaged-replica decision ---------------------------------------------------------

LIVE_ALL = frozenset({1, 2, 3})


@pytest.mark.parametrize(
    ("case", "current", "damaged", "live", "outcome", "leader", "isr", "eligible"),
    [
        # A follower lost data: it only leaves the ISR; the leader stays.
        ("damaged_follower", state(1, (1, 2, 3)), {3}, LIVE_ALL, REMOVED_FROM_ISR, 1, (1, 2), ()),
        # The leader lost data: the first live healthy ISR member in assignment order leads.
        ("damaged_leader", state(1, (1, 2, 3)), {1}, LIVE_ALL, REMOVED_FROM_ISR, 2, (2, 3), ()),
        ("damaged_leader_next_is_down", state(1, (1, 2, 3)), {1}, {1, 3}, REMOVED_FROM_ISR, 3, (2, 3), ()),
        # Whole-cluster restart, the damaged broker came first: no leader until a healthy one registers.
        ("others_not_live_yet", state(NO_LEADER, (1, 2, 3)), {1}, {1}, REMOVED_FROM_ISR, NO_LEADER, (2, 3), ()),
        # Sole ISR member damaged, replicas that left below min.insync.replicas have the data.
        ("eligible_take_over", state(3, (3,), (1,)), {3}, LIVE_ALL, ISR_FROM_ELIGIBLE, 1, (1,), ()),
        ("eligible_not_live_yet", state(NO_LEADER, (3,), (1, 2)), {3}, {3}, ISR_FROM_ELIGIBLE, NO_LEADER, (1, 2), ()),
        ("eligible_first_live", state(3, (3,), (1, 2)), {3}, {2, 3}, ISR_FROM_ELIGIBLE, 2, (1, 2), ()),
        # Every ISR member damaged, one of them eligible too: it is no longer eligible.
        ("damaged_eligible_dropped", state(3, (3,), (1, 2)), {1, 3}, LIVE_ALL, ISR_FROM_ELIGIBLE, 2, (2,), ()),
        ("eligible_no_longer_assigned", state(3, (3,), (4, 1)), {3}, LIVE_ALL, ISR_FROM_ELIGIBLE, 1, (1,), ()),
        # Not in the ISR: it only stops being eligible.
        ("out_of_sync_and_eligible", state(1, (1,), (2, 3)), {3}, LIVE_ALL, NOT_IN_ISR, 1, (1,), (2,)),
        # Nobody else has the data: the damaged replica may lead (an unclean election).
        ("sole_isr_member_offline", state(NO_LEADER, (3,)), {3}, LIVE_ALL, DAMAGED_MAY_LEAD, 3, (3,), ()),
        ("every_isr_member_damaged", state(NO_LEADER, (1, 2)), {1, 2}, {2, 3}, DAMAGED_MAY_LEAD, 2, (1, 2), ()),
        ("none_of_them_live", state(NO_LEADER, (3,)), {3}, {1, 2}, DAMAGED_MAY_LEAD, NO_LEADER, (3,), ()),
    ],
)
def test_damaged_replica_decision(
    case: str,
    current: LeaderAndIsr,
    damaged: set[int],
    live: frozenset[int],
    outcome: str,
    leader: int,
    isr: tuple[int, ...],
    eligible: tuple[int, ...],
) -> None:
    decision = damaged_replica_decision(current, ASSIGNMENT, damaged, live, 5, MIN_ISR)
    assert decision.outcome == outcome, case
    assert decision.unclean == (outcome == DAMAGED_MAY_LEAD)
    after = decision.state or current
    assert (after.leader, after.isr, after.eligible) == (leader, isr, eligible), case
    if decision.state is not None:
        assert (after.leader_epoch, after.controller_epoch, after.zk_version) == (5, 5, 9), case
    # The rule the issue asks for: never a damaged leader while a healthy ISR or eligible replica exists.
    healthy = [r for r in (*current.isr, *current.eligible) if r not in damaged]
    if healthy:
        assert after.leader not in damaged, case


@pytest.mark.parametrize(
    ("case", "current", "damaged"),
    [
        ("not_a_replica_of_note", state(1, (1, 2)), {3}),
        ("damaged_leader_already_leads_alone", state(3, (3,)), {3}),
    ],
)
def test_damaged_replica_decision_writes_nothing_when_nothing_changes(
    case: str, current: LeaderAndIsr, damaged: set[int]
) -> None:
    assert damaged_replica_decision(current, ASSIGNMENT, damaged, LIVE_ALL, 5, MIN_ISR).state is None, case


def test_eligible_replicas_do_not_count_once_the_isr_is_as_large_as_min_insync_replicas() -> None:
    # min.insync.replicas lowered to 1 after replica 1 left: acknowledgements went on without it.
    current = state(NO_LEADER, (3,), (1,))
    decision = damaged_replica_decision(current, ASSIGNMENT, {3}, LIVE_ALL, 5, min_insync_replicas=1)
    assert decision.outcome == DAMAGED_MAY_LEAD and decision.state is not None
    assert (decision.state.leader, decision.state.isr) == (3, (3,))


# --- detection and the claim --------------------------------------------------------------

TP = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("case", "leo", "checkpointed", "expected"),
    [
        ("intact", 100, {"hw": 100, "rp": 90, "epoch": 80}, None),
        ("below_hw", 97, {"hw": 100, "rp": 100, "epoch": 80}, ("hw", 100)),
        ("largest_wins", 50, {"hw": 60, "rp": 70, "epoch": 0}, ("rp", 70)),
        ("epoch_start_only", 10, {"hw": 0, "rp": 0, "epoch": 12}, ("epoch", 12)),
        ("nothing_checkpointed", 0, {"hw": 0, "rp": 0, "epoch": 0}, None),
    ],
)
def test_find_lost_data(case: str, leo: int, checkpointed: dict[str, int], expected: tuple[str, int] | None) -> None:
    found = find_lost_data(TP, leo, checkpointed)
    if expected is None:
        assert found is None, case
        return
    assert found == LostData("t", 0, leo, expected[1], expected[0]), case


def test_claim_round_trip_merge_and_errors() -> None:
    a = LostData("t", 0, 97, 100, REPLICATION_OFFSET_CHECKPOINT)
    b = LostData("u", 3, 0, 5, REPLICATION_OFFSET_CHECKPOINT)
    assert decode_claim("/p", encode_claim([b, a])) == [a, b]
    newer = a._replace(log_end_offset=90)
    assert merge_claims([a, b], [newer]) == [newer, b]
    for garbage in (b"", b"[]", b'{"partitions":[{"topic":"t"}]}', b"\xff"):
        with pytest.raises(ClaimDataError, match="/p: unreadable damaged-log claim"):
            decode_claim("/p", garbage)


def _write_records_and_close(log_dir: Path) -> int:
    """A log of a few hundred records, closed cleanly with a high watermark at its end; returns the LEO."""
    logs = LogManager((log_dir,), LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512), RecordingLogger())
    log = logs.get_or_create(TP)
    fill(log, 30, seed=3)
    leo = log.log_end_offset
    logs.write_high_watermarks({TP: leo})
    logs.close()
    return leo


def _damage_tail(log_dir: Path, length: int) -> None:
    segment = sorted((log_dir / "t-0").glob("*.log"))[-1]
    with segment.open("r+b") as f:
        f.seek(segment.stat().st_size - length)
        f.write(bytes(length))


def test_a_damaged_tail_after_a_clean_shutdown_is_cut_and_reported_once(tmp_path: Path) -> None:
    leo = _write_records_and_close(tmp_path)
    _damage_tail(tmp_path, 100)
    logger = RecordingLogger()
    logs = LogManager((tmp_path,), LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512), logger)
    log = logs.get(TP)
    assert log is not None and log.log_end_offset < leo
    assert logger.events("log_index_rebuilt"), "the clean-shutdown path must not trust a tail that fails its CRC"
    (event,) = logger.events("log_recovered_below_checkpoint")
    assert event["topic"] == "t" and event["partition"] == 0
    assert (event["log_end_offset"], event["checkpointed_offset"]) == (log.log_end_offset, leo)
    assert event["checkpoint"] == REPLICATION_OFFSET_CHECKPOINT
    assert logs.lost_data == [LostData("t", 0, log.log_end_offset, leo, REPLICATION_OFFSET_CHECKPOINT)]
    logs.close()


def test_an_intact_log_and_a_truncation_that_was_checkpointed_are_not_damage(tmp_path: Path) -> None:
    leo = _write_records_and_close(tmp_path)
    logger = RecordingLogger()
    config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512)
    logs = LogManager((tmp_path,), config, logger)
    assert logs.lost_data == [] and not logger.events("log_recovered_below_checkpoint")
    log = logs.get(TP)
    assert log is not None
    log.truncate_to(leo - 5)  # a follower that diverged, then checkpointed as the replica fetcher does
    logs.write_high_watermarks({TP: log.log_end_offset})
    logs.flush_checkpoints()
    log.leader_epoch_cache.flush()
    logs.close()
    again = LogManager((tmp_path,), config, RecordingLogger())
    assert again.lost_data == []
    again.close()


def test_recovery_below_the_recovery_point_after_a_crash_is_damage(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 40, seed=5)
    log.flush()
    leo = log.log_end_offset
    OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").write({TP: leo})
    log.close()
    _damage_tail(tmp_path, 30)
    (tmp_path / ".kafka_cleanshutdown").unlink(missing_ok=True)  # a crash: no marker
    logger = RecordingLogger()
    logs = LogManager((tmp_path,), LogConfig(segment_bytes=8192, index_interval_bytes=512), logger)
    (event,) = logger.events("log_recovered_below_checkpoint")
    assert event["checkpoint"] == "recovery-point-offset-checkpoint" and event["checkpointed_offset"] == leo
    logs.close()


# --- the controller's handler, over a fake store -------------------------------------------


class FakeStore:
    """The four ControllerZkStore calls the handler makes, on dicts; versions as ZooKeeper counts them."""

    def __init__(self, states: dict[TopicPartition, LeaderAndIsr], claims: dict[int, list[LostData]]) -> None:
        self.states = dict(states)
        self.claims = {b: (lost, 0) for b, lost in claims.items()}
        self.deleted: list[int] = []

    async def topic_min_isr_override(self, topic: str) -> int | None:
        return MIN_ISR

    async def read_damage_claim(self, broker_id: int) -> tuple[list[LostData], int] | None:
        return self.claims.get(broker_id)

    async def delete_damage_claim(self, broker_id: int, version: int, epoch_zk_version: int) -> bool:
        assert self.claims[broker_id][1] == version
        del self.claims[broker_id]
        self.deleted.append(broker_id)
        return True

    async def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self.states.get(tp)

    async def update_partition_state(self, tp: TopicPartition, state: LeaderAndIsr, epoch_zk_version: int) -> int:
        assert state.zk_version == self.states[tp].zk_version  # conditional, as ZooKeeper would check
        self.states[tp] = state.with_zk_version(state.zk_version + 1)
        return state.zk_version + 1


class StateLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def controller(self, epoch: int, message: str, level: str = "INFO") -> None:
        self.lines.append((level, message))


def _handler_setup(
    state_: LeaderAndIsr, live: tuple[int, ...]
) -> tuple[DamagedReplicaHandler, FakeStore, ControllerContext, RequestBatch, StateLog, RecordingLogger]:
    ctx = ControllerContext()
    ctx.epoch = 5
    for broker_id in live:
        endpoint = kz.EndPoint("127.0.0.1", 9090 + broker_id, "PLAINTEXT", "PLAINTEXT")
        ctx.add_live_brokers([LiveBroker(kz.BrokerRegistration(broker_id, (endpoint,)), broker_id)])
    ctx.set_assignment("t", {0: ASSIGNMENT})
    ctx.leadership[TP] = state_
    ctx.partition_states[TP] = PState.ONLINE_PARTITION
    store = FakeStore({TP: state_}, {1: [LostData("t", 0, 97, 100, REPLICATION_OFFSET_CHECKPOINT)]})
    batch, state_log, logger = RequestBatch(), StateLog(), RecordingLogger()
    handler = DamagedReplicaHandler(ctx, store, lambda: batch, state_log, logger)  # type: ignore[arg-type]
    return handler, store, ctx, batch, state_log, logger


def test_the_handler_moves_leadership_off_a_damaged_starting_broker_and_deletes_its_claim() -> None:
    handler, store, ctx, batch, state_log, logger = _handler_setup(state(1, (1, 2, 3)), live=(1, 2, 3))
    asyncio.run(handler.on_broker_startup([1]))
    written = store.states[TP]
    assert (written.leader, written.isr, written.leader_epoch) == (2, (2, 3), 5)
    assert ctx.leadership[TP] == written and ctx.partition_states[TP] is PState.ONLINE_PARTITION
    assert sorted(batch.leader_and_isr) == [2, 3]  # the starting broker learns it from its own start-up
    assert ctx.unclean_excluded(TP, written.isr) == {1}  # no unclean pick until it rejoins the ISR
    assert ctx.unclean_excluded(TP, (1, 2, 3)) == frozenset() and not ctx.damaged_replicas
    assert store.deleted == [1]
    (event,) = logger.events("damaged_replica_handled")
    assert (event["target"], event["outcome"], event["new_leader"]) == (1, REMOVED_FROM_ISR, 2)
    assert event["checkpointed_offset"] == 100 and event["log_end_offset"] == 97
    assert (
        state_log.lines and state_log.lines[0][0] == "WARN" and "Damaged replica out of sync" in state_log.lines[0][1]
    )


def test_the_handler_at_failover_leaves_the_partition_offline_and_sends_nothing() -> None:
    handler, store, ctx, batch, _, _ = _handler_setup(state(1, (1, 2, 3)), live=(1,))
    asyncio.run(handler.on_failover())
    assert (store.states[TP].leader, store.states[TP].isr) == (NO_LEADER, (2, 3))
    assert ctx.partition_states[TP] is PState.OFFLINE_PARTITION
    assert not batch.leader_and_isr and store.deleted == [1]


def test_the_handler_logs_an_unclean_lead_when_no_other_replica_has_the_data() -> None:
    handler, store, _, _, state_log, _ = _handler_setup(state(NO_LEADER, (1,)), live=(1, 2, 3))
    asyncio.run(handler.on_broker_startup([1]))
    assert store.states[TP].leader == 1
    (level, message), *_ = state_log.lines
    assert level == "WARN" and message.startswith("Unclean leader election: replica 1 of t-0 lost acknowledged data")


def test_a_tail_cut_after_a_crash_is_damage_even_with_no_checkpoint_above_it(tmp_path: Path) -> None:
    # A power loss shows as a file longer than what landed in it: the cut records may have been acknowledged.
    directory = tmp_path / "t-0"
    log, _ = open_log(directory)
    fill(log, 40, seed=6)
    leo = log.log_end_offset
    log.close()
    with sorted(directory.glob("*.log"))[-1].open("ab") as f:
        f.write(bytes(4096))
    logger = RecordingLogger()
    logs = LogManager((tmp_path,), LogConfig(segment_bytes=8192, index_interval_bytes=512), logger)
    (event,) = logger.events("log_recovered_below_checkpoint")
    assert (event["checkpoint"], event["log_end_offset"], event["checkpointed_offset"]) == (RECOVERY_CUT, leo, leo + 1)
    logs.close()
