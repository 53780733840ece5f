"""The leader's view of one follower: match/next indices and flow control (etcd tracker/progress.go)."""

from __future__ import annotations

import enum
from collections import deque


class ProgressState(enum.Enum):
    # Probe: one append in flight until the follower answers; used until the
    # leader knows where the follower's log matches.
    PROBE = "probe"
    # Replicate: optimistic streaming, up to inflight_appends_max appends in flight.
    REPLICATE = "replicate"
    # Snapshot: the follower is behind the compacted log; nothing is sent
    # until the snapshot transfer is reported done or failed.
    SNAPSHOT = "snapshot"


class Progress:
    __slots__ = (
        "match",
        "next",
        "state",
        "probe_sent",
        "pending_snapshot",
        "recent_active",
        "lazy_commits",
        "stalled",
        "sent_at_heartbeat",
        "commit_sent",
        "durable_sent",
        "inflight",
        "_max",
    )

    def __init__(self, next_index: int, inflight_max: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.recent_active = False
        # The follower said it needs no COMMIT messages (Message.lazy_commits); a
        # new Progress assumes it does until its first answer says otherwise.
        self.lazy_commits = False
        # An append sent before the previous heartbeat is still unacknowledged at
        # this one: the follower cannot be counted on to commit the next entry.
        self.stalled = False
        self.sent_at_heartbeat = 0  # the last index in flight at the previous heartbeat
        self.commit_sent = 0  # the commit index of the last APPEND or COMMIT sent to it
        self.durable_sent = 0  # the index of the last DURABLE sent to it (Raft._notify_durable)
        self.inflight: deque[int] = deque()  # last index of each append in flight
        self._max = inflight_max

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= self._max
        return True

    def heartbeat_passed(self) -> None:
        """Another heartbeat interval ended: did an append stay unanswered through all of it?"""
        self.stalled = self.match < self.sent_at_heartbeat
        self.sent_at_heartbeat = self.inflight[-1] if self.inflight else 0

    def inflight_full(self) -> bool:
        return len(self.inflight) >= self._max

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            pending = self.pending_snapshot
            self.state = ProgressState.PROBE
            self.next = max(self.match + 1, pending + 1)
        else:
            self.state = ProgressState.PROBE
            self.next = self.match + 1
        self.pending_snapshot = 0
        self.probe_sent = False
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.pending_snapshot = 0
        self.probe_sent = False
        self.inflight.clear()

    def become_snapshot(self, snapshot_index: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = snapshot_index
        self.probe_sent = False
        self.inflight.clear()

    def sent_entries(self, last_index: int) -> None:
        """Record an append carrying entries up to last_index."""
        if self.state is ProgressState.REPLICATE:
            self.next = last_index + 1
            self.inflight.append(last_index)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True

    def maybe_update(self, index: int) -> bool:
        """An acknowledgement up to `index`; False when it tells nothing new."""
        updated = False
        if index > self.match:
            self.match = index
            self.probe_sent = False
            self.stalled = False
            updated = True
        self.next = max(self.next, index + 1)
        return updated

    def free_acknowledged(self, index: int) -> None:
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()

    def free_first(self) -> None:
        if self.inflight:
            self.inflight.popleft()

    def regressed(self, match_hint: int) -> None:
        """The follower lost entries it had acknowledged (a cut tail, and it says its log is incomplete):
        nothing it holds counts as matched any more; probe again from where the logs may match."""
        self.match = 0
        self.become_probe()
        self.next = match_hint + 1

    def maybe_decrease_to(self, rejected: int, match_hint: int) -> bool:
        """A rejection of the append whose previous index was `rejected`.

        `match_hint` is where the leader now believes the logs may match
        (already adjusted with the follower's term hint). False for stale
        rejections (duplicated or reordered responses).
        """
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.probe_sent = False
        return True
