"""One partition as this broker sees it: leader or follower, ISR, LEO and high watermark (Kafka's `Partition`).

The leader keeps, per follower, the LEO it last fetched from and the last time
it was caught up (docs/research/kafka.md §2.16, K24 Replica.updateFetchState):
`last_caught_up_ms` becomes the fetch time when the fetch offset reached the
leader's LEO at that fetch, or the previous fetch's time when it reached the
LEO the leader had at the previous fetch. From those:

* HW = min LEO over the maximal ISR's members (the leader's own LEO included); it
  only moves forward (K24 maybeIncrementLeaderHW).
* Maximal ISR (KIP-497): while an ISR write is in flight or its outcome unknown,
  the union of the ISR and the one written. An addition counts at once, so
  nothing is acknowledged that the ISR ZooKeeper may already hold would lack; a
  removal counts only once written.
* A follower is out of sync when its LEO is behind the leader's and it has not
  been caught up for `replica.lag.time.max.ms`.
* A follower rejoins when its LEO reaches the HW and the start offset of the
  current leader epoch.

Pure bookkeeping: no I/O besides the log, no ZooKeeper. The replica manager
writes ISR changes to ZooKeeper and wakes waiting requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.log import PartitionLog
from client.kafka.structs import TopicPartition


@dataclass(slots=True)
class FollowerState:
    leo: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as its last fetch said (DeleteRecords waits for it: `low_watermark`)

    def update(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms


@dataclass(slots=True)
class Partition:
    tp: TopicPartition
    local_id: int
    log: PartitionLog
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = -1
    high_watermark: int = 0
    leader_epoch_start_offset: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # An ISR write is in flight: a second one would race on the zk version.
    isr_update_pending: bool = False
    # KIP-497's maximal ISR while a write is unsettled (in flight, or its reply lost); empty when none is.
    pending_maximal_isr: tuple[int, ...] = ()

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The replicas the HW and acks=all wait for: the ISR plus any an unsettled write adds (KIP-497)."""
        return self.pending_maximal_isr or self.isr

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id

    @property
    def leo(self) -> int:
        return self.log.log_end_offset

    # ---------------------------------------------------------------- role changes

    def make_leader(
        self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], zk_version: int, now_ms: int
    ) -> None:
        """Become leader at `leader_epoch`; followers start as not caught up, except the ISR keeps its grace."""
        was_leader_same_epoch = self.is_leader and self.leader_epoch == leader_epoch
        self.leader = self.local_id
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.replicas = replicas
        self.zk_version = zk_version
        if was_leader_same_epoch:
            return
        self.leader_epoch_start_offset = self.leo
        self.log.leader_epoch_cache.assign(leader_epoch, self.leo)
        # ISR members get the full lag time to fetch from the new leader (Kafka resets
        # lastCaughtUpTime to now for them in makeLeader).
        self.followers = {
            r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0) for r in replicas if r != self.local_id
        }
        self.high_watermark = min(max(self.high_watermark, self.log.log_start_offset), self.leo)
        self.isr_update_pending = False
        self.pending_maximal_isr = ()

    def make_follower(
        self, leader: int, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], zk_version: int
    ) -> bool:
        """Follow `leader`; True when the leader or its epoch changed (the fetcher must restart)."""
        changed = leader != self.leader or leader_epoch != self.leader_epoch
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.replicas = replicas
        self.zk_version = zk_version
        self.followers = {}
        self.isr_update_pending = False
        self.pending_maximal_isr = ()
        return changed

    # ---------------------------------------------------------------- ISR writes (KIP-497)

    def begin_isr_write(self, new_isr: tuple[int, ...]) -> None:
        """A write of `new_isr` starts: its additions count for the HW and acks=all from now on."""
        self.isr_update_pending = True
        self.pending_maximal_isr = tuple(dict.fromkeys((*self.maximal_isr, *new_isr)))

    def settle_isr_write(self, isr: tuple[int, ...], zk_version: int) -> None:
        """ZooKeeper holds `isr` at `zk_version`: the write is settled and the maximal ISR is the ISR again."""
        self.isr = isr
        self.zk_version = zk_version
        self.isr_update_pending = False
        self.pending_maximal_isr = ()

    # ---------------------------------------------------------------- leader bookkeeping

    def update_follower(self, replica: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1) -> bool:
        """Record a follower's fetch; True when the HW moved."""
        state = self.followers.get(replica)
        if state is None:
            return False
        state.update(fetch_offset, self.leo, now_ms)
        state.log_start_offset = log_start_offset
        return self.maybe_increment_hw()

    def low_watermark(self) -> int:
        """The smallest log start offset of the leader and the followers in the ISR (Kafka 2.8
        `Partition.lowWatermarkIfLeader` takes every follower on a live broker; one out of the ISR here
        catches up through OFFSET_OUT_OF_RANGE, so it does not hold DeleteRecords up)."""
        low = self.log.log_start_offset
        for replica in self.isr:
            state = self.followers.get(replica) if replica != self.local_id else None
            if state is not None:
                low = min(low, state.log_start_offset)
        return low

    def maybe_increment_hw(self) -> bool:
        leo = self.leo
        new_hw = leo
        followers = self.followers
        for replica in self.pending_maximal_isr or self.isr:  # maximal_isr, inlined on the fetch path
            if replica != self.local_id:
                state = followers.get(replica)
                follower_leo = state.leo if state is not None else -1
                if follower_leo < new_hw:
                    new_hw = follower_leo
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def caught_up_followers_to_add(self) -> list[int]:
        """Replicas outside the ISR whose LEO reached the HW and the current epoch's start."""
        hw, start = self.high_watermark, self.leader_epoch_start_offset
        return [
            r
            for r, state in self.followers.items()
            if r not in self.isr and r in self.replicas and state.leo >= hw and state.leo >= start
        ]

    def out_of_sync_followers(self, now_ms: int, lag_max_ms: int) -> list[int]:
        leo = self.leo
        result = []
        for replica in self.isr:
            if replica == self.local_id:
                continue
            state = self.followers.get(replica)
            if state is None or (state.leo != leo and now_ms - state.last_caught_up_ms > lag_max_ms):
                result.append(replica)
        return result
