"""The leader's bookkeeping of a partition: follower LEOs, the high watermark, ISR shrink and expand (K24)."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from broker.log import LogConfig, PartitionLog
from broker.partition import FollowerState, Partition
from client.kafka.records import RecordBatchBuilder
from client.kafka.structs import TopicPartition

LAG_MS = 10_000


def batch(n: int) -> bytearray:
    builder = RecordBatchBuilder(base_timestamp_ms=1_700_000_000_000)
    for i in range(n):
        builder.append(None, b"v%d" % i)
    return bytearray(builder.build())


@pytest.fixture
def leader(tmp_path: Path) -> Partition:
    log = PartitionLog(tmp_path / "t-0", LogConfig(), structlog.get_logger())
    partition = Partition(TopicPartition("t", 0), 1, log)
    partition.make_leader(leader_epoch=0, isr=(1, 2, 3), replicas=(1, 2, 3), zk_version=0, now_ms=1000)
    return partition


def test_hw_is_the_isr_minimum_leo_and_never_moves_back(leader: Partition) -> None:
    leader.log.append(batch(10), leader.leader_epoch)
    assert not leader.maybe_increment_hw()  # followers have not fetched: HW stays 0
    assert leader.high_watermark == 0
    assert not leader.update_follower(2, 10, now_ms=1100)
    assert leader.update_follower(3, 4, now_ms=1100)
    assert leader.high_watermark == 4
    assert leader.update_follower(3, 10, now_ms=1200)
    assert leader.high_watermark == 10
    leader.isr = (1, 2)
    assert not leader.update_follower(2, 10, now_ms=1300)
    assert leader.high_watermark == 10


def test_hw_of_a_sole_leader_is_its_leo(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(), structlog.get_logger())
    partition = Partition(TopicPartition("t", 0), 1, log)
    partition.make_leader(leader_epoch=3, isr=(1,), replicas=(1,), zk_version=0, now_ms=0)
    log.append(batch(5), 3)
    assert partition.maybe_increment_hw()
    assert partition.high_watermark == 5


def test_a_follower_that_stops_fetching_drops_out_after_the_lag_time(leader: Partition) -> None:
    leader.log.append(batch(3), 0)
    leader.update_follower(2, 3, now_ms=2000)
    leader.update_follower(3, 3, now_ms=2000)
    leader.log.append(batch(3), 0)
    # Nobody fetched the new records: still in sync until the lag time passes since the last catch-up.
    assert leader.out_of_sync_followers(now_ms=2000 + LAG_MS, lag_max_ms=LAG_MS) == []
    leader.update_follower(2, 6, now_ms=2000 + LAG_MS)
    assert leader.out_of_sync_followers(now_ms=2001 + LAG_MS, lag_max_ms=LAG_MS) == [3]


def test_a_caught_up_follower_is_not_out_of_sync_however_long_it_was_quiet(leader: Partition) -> None:
    leader.log.append(batch(3), 0)
    leader.update_follower(2, 3, now_ms=1000)
    leader.update_follower(3, 3, now_ms=1000)
    assert leader.out_of_sync_followers(now_ms=1000 + 10 * LAG_MS, lag_max_ms=LAG_MS) == []


def test_a_follower_rejoins_when_its_leo_reaches_the_hw_and_the_epoch_start(leader: Partition) -> None:
    leader.isr = (1, 2)
    leader.log.append(batch(4), 0)
    leader.update_follower(2, 4, now_ms=1100)
    assert leader.high_watermark == 4
    leader.update_follower(3, 3, now_ms=1100)
    assert leader.caught_up_followers_to_add() == []
    leader.update_follower(3, 4, now_ms=1200)
    assert leader.caught_up_followers_to_add() == [3]


def test_last_caught_up_time_follows_kafkas_rule() -> None:
    state = FollowerState()
    state.update(fetch_offset=5, leader_leo=5, now_ms=100)
    assert state.last_caught_up_ms == 100
    # Behind the current LEO but at the LEO of the previous fetch: caught up as of the previous fetch.
    state.update(fetch_offset=5, leader_leo=9, now_ms=200)
    assert state.last_caught_up_ms == 100
    state.update(fetch_offset=9, leader_leo=12, now_ms=300)
    assert state.last_caught_up_ms == 200
    state.update(fetch_offset=10, leader_leo=14, now_ms=400)
    assert state.last_caught_up_ms == 200


def test_becoming_leader_records_the_epoch_start_offset(leader: Partition) -> None:
    leader.log.append(batch(7), 0)
    leader.make_leader(leader_epoch=1, isr=(1, 2), replicas=(1, 2, 3), zk_version=1, now_ms=5000)
    assert leader.leader_epoch_start_offset == 7
    assert leader.log.leader_epoch_cache.entries[-1].epoch == 1
    assert leader.log.leader_epoch_cache.entries[-1].start_offset == 7


def test_an_isr_write_in_flight_counts_additions_at_once_and_removals_once_written(tmp_path: Path) -> None:
    """KIP-497's maximal ISR: the HW waits for a replica being added and still for one being removed."""
    log = PartitionLog(tmp_path / "t-0", LogConfig(), structlog.get_logger())
    partition = Partition(TopicPartition("t", 0), 1, log)
    partition.make_leader(leader_epoch=0, isr=(1, 2), replicas=(1, 2, 3), zk_version=0, now_ms=0)
    log.append(batch(4), 0)
    partition.begin_isr_write((1, 2, 3))
    assert not partition.update_follower(2, 4, now_ms=10)  # broker 3, being added, lacks the records
    assert partition.update_follower(3, 4, now_ms=10) and partition.high_watermark == 4
    partition.settle_isr_write((1, 2, 3), zk_version=1)
    log.append(batch(2), 0)
    partition.begin_isr_write((1, 2))  # shrink out broker 3: it still counts until the write is settled
    assert not partition.update_follower(2, 6, now_ms=20)
    partition.settle_isr_write((1, 2), zk_version=2)
    assert partition.maybe_increment_hw() and partition.high_watermark == 6
