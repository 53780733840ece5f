"""A session's writes on their way to the log, and when each may be submitted without overtaking another.

ZooKeeper applies a session's writes in the order the client sent them. Writes
submitted on one route (the same leader, in the same term: proposed here while
this server leads, or forwarded to that leader) keep their order in the log,
and when one of them is lost so is every later one: the log loses a suffix. A
change of leader or term breaks that: an earlier write may still be waiting to
learn that it was lost, and be retried through the new leader after a later
one went there directly. So a write is submitted only when every earlier write
of the session still unanswered was submitted on the route it takes itself;
one on another route is waited for until it is answered, one not yet
submitted until it is.

A route is (leader id, term) as this server saw them when it submitted the
write, its own id while it leads (TxnSubmitter.route); NO_ROUTE while no
leader was known. Found by a test that keeps writes in flight on a leader
while it is deposed (tests/test_zk_semantics_cluster.py): before, writes that
arrived after the change went straight to the new leader, ahead of earlier
ones still waiting to learn that they were lost.

Not covered: within one route, a leader that refuses a forwarded batch
(PROPOSAL_DROPPED, while it hands leadership over) and accepts the next one
because the hand-over was abandoned in between; the refused batch is retried
after it.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable

Route = tuple[int, int]
NO_ROUTE: Route = (0, 0)


class SessionWrite:
    """One write, until it is answered: the route it was first submitted on (None until then)."""

    __slots__ = ("route", "placed", "answered", "_waiters", "_writes")

    def __init__(self, writes: SessionWrites) -> None:
        self.route: Route | None = None
        self.placed = False  # submitted (or answered without being submitted)
        self.answered = False
        # Futures of later writes waiting for this one to change; made only when one has to wait.
        self._waiters: list[asyncio.Future[None]] | None = None
        self._writes = writes

    def placed_on(self, route: Route) -> None:
        """Submitted on `route` (where a retry goes later does not change it)."""
        if self.placed:
            return
        self.route = route
        self.placed = True
        self._writes.resolved(self, route)
        self._wake()

    def settle(self) -> None:
        """Answered, or abandoned: nothing waits for it any longer."""
        if self.answered:
            return
        if not self.placed:
            self.placed = True
            self._writes.resolved(self, None)
        self.answered = True
        if self.route is not None:
            self._writes.answered(self.route)
        self._wake()

    def changed(self) -> asyncio.Future[None]:
        """A future done when this write is next submitted or answered."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        return fut

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)


class SessionWrites:
    """The unanswered writes of one session, oldest first."""

    def __init__(self) -> None:
        self._queue: deque[SessionWrite] = deque()  # unanswered, in the session's order
        self._unplaced: deque[SessionWrite] = deque()  # neither submitted nor answered, in order
        self._on_route: Counter[Route] = Counter()  # submitted and unanswered, per route
        self._submitted = 0  # submitted and unanswered, all routes

    def add(self) -> SessionWrite:
        """A new write, the session's latest."""
        while self._queue and self._queue[0].answered:
            self._queue.popleft()
        write = SessionWrite(self)
        self._queue.append(write)
        self._unplaced.append(write)
        return write

    def resolved(self, write: SessionWrite, route: Route | None) -> None:
        if self._unplaced and self._unplaced[0] is write:
            self._unplaced.popleft()
        else:
            self._unplaced.remove(write)  # out of order: only a write answered without being submitted
        if route is not None:
            self._on_route[route] += 1
            self._submitted += 1

    def answered(self, route: Route) -> None:
        self._on_route[route] -= 1
        self._submitted -= 1

    def take_turn(self, write: SessionWrite, route: Route) -> bool:
        """Mark `write` submitted on `route` if it may go now: every earlier write of the session
        submitted, all on `route` (the common case, in constant time), or answered."""
        if not (self._unplaced and self._unplaced[0] is write and self._on_route[route] == self._submitted):
            if self._blockers(write, route):
                return False
        write.placed_on(route)
        return True

    async def wait_turn(self, write: SessionWrite, route_now: Callable[[], Route]) -> Route:
        """Wait until `write` may be submitted; returns the route it takes, marking it submitted there.
        The caller submits it in the same step (no await in between)."""
        while True:
            route = route_now()
            blockers = self._blockers(write, route)
            if not blockers:
                write.placed_on(route)
                return route
            await asyncio.wait([b.changed() for b in blockers], return_when=asyncio.FIRST_COMPLETED)

    def _blockers(self, write: SessionWrite, route: Route) -> list[SessionWrite]:
        """Earlier writes `write` may not overtake on `route`: not submitted yet, or unanswered on another."""
        blockers = []
        for earlier in self._queue:
            if earlier is write:
                break
            if not earlier.answered and (not earlier.placed or earlier.route != route):
                blockers.append(earlier)
        return blockers
