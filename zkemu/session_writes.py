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
write, its own id while it leads (WriteRouter.route); NO_ROUTE while no
leader was known. Found by a test that keeps writes in flight on a leader
while it is deposed (tests/test_zk_semantics_cluster.py): before, writes that
arrived after the change went straight to the new leader, ahead of earlier
ones still waiting to learn that they were lost.

A write that was not taken is submitted again (WriteRouter.submit), in its
place: it counts as not submitted until it is, so later writes wait for it.
A lost write takes every later one on its route with it, so they all go again
in order. A refusal need not (a leader that refuses a batch while it hands
leadership over, or has too much uncommitted data, may take the next one):
a refused write is not retried once a later write of its session went the
same way, and its client gets ConnectionLoss instead, as ZooKeeper's would
when its connection broke.
"""

from __future__ import annotations

import asyncio
from collections import deque
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

    def try_take(self, route: Route) -> bool:
        """Mark this write submitted on `route` if it may go there now (SessionWrites.try_take)."""
        return self._writes.try_take(self, route)

    async def wait_turn(self, route_now: Callable[[], Route]) -> None:
        """Wait until this write may be submitted, then mark it submitted on the route it takes
        (`route_now()` then); the caller submits it in the same step (no await in between)."""
        await self._writes.wait_turn(self, route_now)

    def unplace(self) -> None:
        """Not taken where it was submitted (refused, lost, or no leader known): later writes of the
        session wait for it again until it is submitted anew."""
        if not self.placed or self.answered:
            return
        route, self.route, self.placed = self.route, None, False
        self._writes.unresolved(route)

    def may_retry(self) -> bool:
        """Whether a write refused on its route may be submitted again without landing after a later
        write of its session: none went on that route after it (refusals, unlike losses, need not
        take every later write on the route with them)."""
        return not self._writes.later_on_route(self)

    def settle(self) -> None:
        """Answered, or abandoned: nothing waits for it any longer."""
        if self.answered:
            return
        if not self.placed:
            self.placed = True
            self._writes.resolved(self, None)
        self.answered = True
        if self.route is not None:
            self._writes.answered()
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
        self._submitted = 0  # submitted and unanswered
        # The route of every submitted unanswered write, or None when they are on more than one.
        self._route: Route | None = None

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
            if self._submitted == 0:
                self._route = route
            elif route != self._route:
                self._route = None
            self._submitted += 1

    def unresolved(self, route: Route | None) -> None:
        """A write submitted on `route` is back among the unsubmitted (SessionWrite.unplace)."""
        if route is not None:
            self._submitted -= 1
        self._unplaced = deque(w for w in self._queue if not w.placed and not w.answered)

    def later_on_route(self, write: SessionWrite) -> bool:
        """Whether a later write went on `write`'s route, answered or not (a follower answers a write
        when it applies it, which can come before the leader's refusal of an earlier one)."""
        later = False
        for other in self._queue:
            if later and other.route == write.route:
                return True
            later = later or other is write
        return False

    def answered(self) -> None:
        self._submitted -= 1

    def try_take(self, write: SessionWrite, route: Route) -> bool:
        """Mark `write` submitted on `route` if it may go now: every earlier write of the session
        submitted, all on `route` (the common case, in constant time), or answered."""
        unplaced = self._unplaced
        all_on_route = self._submitted == 0 or self._route == route
        if not (unplaced and unplaced[0] is write and all_on_route):
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
