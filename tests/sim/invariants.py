"""Safety invariants of Raft (Raft paper Fig. 3), checked incrementally after every event.

Each check costs O(1) or O(entries just appended, committed or applied),
except the periodic full log audit, which the simulator runs rarely.

The checker keeps a global history that outlives crashes:

* `leader_of_term`: who led each term (election safety);
* `entry_ids`: for every (index, term) any log ever held, its payload and the
  term of the entry before it in that log. Checking every appended entry
  against it proves log matching by induction: equal (index, term) implies an
  equal payload and an equal (index-1, term'), and so on down;
* `committed` / `commit_term`: the committed prefix as commit indices revealed
  it (the term of each entry, and the term it was committed in). A leader
  reveals it by counting acknowledgements; a follower of a 3-node cluster by
  a DURABLE notice, and only for an entry of its current term that a quorum
  of disks holds (checked against the disks themselves). No node's commit
  index may otherwise run ahead of it or disagree with it; every leader of a
  later term must hold it (leader completeness); every ReadIndex answer must
  cover what it held when the read was issued (linearizable reads);
* `applied`: the entries state machines applied, entry i at position i-1.
  Every node's state machine must be a prefix of it (state-machine safety).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from quorum.raft.types import Entry, EntryKind, ReadState, Role


class InvariantFailure(AssertionError):
    """A safety or liveness property of the simulated cluster does not hold."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.detail = detail


def fail(name: str, detail: str) -> InvariantFailure:
    return InvariantFailure(name, detail)


class _CoreView(Protocol):
    """The part of `quorum.raft.core.Raft` the checks read."""

    @property
    def node_id(self) -> int: ...
    @property
    def role(self) -> Role: ...
    @property
    def term(self) -> int: ...
    @property
    def commit_index(self) -> int: ...
    @property
    def first_index(self) -> int: ...
    @property
    def last_index(self) -> int: ...

    def term_at(self, index: int) -> int | None: ...

    def entry(self, index: int) -> Entry: ...


class Invariants:
    def __init__(self) -> None:
        self.leader_of_term: dict[int, int] = {}
        self.entry_ids: dict[tuple[int, int], tuple[bytes, EntryKind, int]] = {}
        self.applied: list[Entry] = []
        # Committed prefix as leaders reported it: entry term, and the leader term it committed in.
        self.committed: list[int] = []
        self.commit_term: list[int] = []
        self.read_bounds: dict[bytes, int] = {}
        # Proposals a leader reported committed: index -> entry (durability).
        self.acked: dict[int, Entry] = {}

    # -- election safety (at most one leader per term, ever) -------------------------

    def check_leader(self, node_id: int, term: int) -> bool:
        """Record that `node_id` leads `term`; returns True the first time."""
        holder = self.leader_of_term.get(term)
        if holder == node_id:
            return False
        if holder is not None:
            raise fail("election safety", f"nodes {holder} and {node_id} are both leader of term {term}")
        self.leader_of_term[term] = node_id
        return True

    # -- log matching -----------------------------------------------------------------

    def check_appended(self, node_id: int, entries: tuple[Entry, ...], prev_term: int | None) -> None:
        """`entries` were just written to `node_id`'s log after an entry of term `prev_term`."""
        ids = self.entry_ids
        expect = entries[0].index
        for e in entries:
            if e.index != expect:
                raise fail("log matching", f"node {node_id} appended a non-contiguous batch at {e.index}")
            expect += 1
            key = (e.index, e.term)
            known = ids.get(key)
            if known is None:
                ids[key] = (e.data, e.kind, -1 if prev_term is None else prev_term)
            else:
                data, kind, known_prev = known
                if data != e.data or kind != e.kind:
                    raise fail(
                        "log matching",
                        f"node {node_id} holds entry ({e.index}, term {e.term}) = {e.data!r}/{e.kind.name}, "
                        f"another log held {data!r}/{kind.name}",
                    )
                if prev_term is not None and known_prev >= 0 and known_prev != prev_term:
                    raise fail(
                        "log matching",
                        f"entry ({e.index}, term {e.term}) follows an entry of term {prev_term} on node "
                        f"{node_id} but one of term {known_prev} elsewhere",
                    )
            prev_term = e.term

    def audit_log(self, core: _CoreView) -> None:
        """Full check of a settled node's log against everything appended so far (run periodically)."""
        first, last = core.first_index, core.last_index
        prev = core.term_at(first - 1)
        ids = self.entry_ids
        for i in range(first, last + 1):
            e = core.entry(i)
            if e.index != i:
                raise fail("log matching", f"node {core.node_id}: entry({i}) returned index {e.index}")
            known = ids.get((i, e.term))
            if known is None:
                raise fail(
                    "log matching",
                    f"node {core.node_id} holds entry ({i}, term {e.term}) that no Ready ever persisted",
                )
            if known[0] != e.data or known[1] != e.kind or (prev is not None and known[2] >= 0 and known[2] != prev):
                raise fail("log matching", f"node {core.node_id}: entry ({i}, term {e.term}) differs from history")
            if prev is not None and e.term < prev:
                raise fail("log matching", f"node {core.node_id}: terms decrease at index {i}")
            prev = e.term
        committed = self.committed
        for i in range(max(first, 1), min(last, core.commit_index, len(committed)) + 1):
            if core.term_at(i) != committed[i - 1]:
                raise fail(
                    "state machine safety",
                    f"node {core.node_id} has ({i}, term {core.term_at(i)}) below its commit index, "
                    f"but ({i}, term {committed[i - 1]}) was committed",
                )

    # -- commitment and leader completeness ------------------------------------------

    def check_commit(
        self, core: _CoreView, durable_on_quorum: Callable[[int, int], bool] | None = None
    ) -> tuple[int, int] | None:
        """Check `core`'s commit index against what is known committed (O(1) amortized).

        A leader's commit index is the cluster's knowledge of commitment: every index it covers
        becomes committed "in" the leader's term. A follower learns its commit index from a
        leader, so it can never be ahead of every leader (atomix/copycat#265), unless it commits
        by itself on the leader's DURABLE notice: then the entry there must be of its current term
        and on a quorum of disks (`durable_on_quorum(index, term)`, Raft §5.4.2), which commits
        it. The entry it calls committed must be the committed one. Returns the (first, last)
        indices this call newly recorded as committed, or None.
        """
        c = core.commit_index
        committed = self.committed
        known = len(committed)
        if c <= known:
            if c > 0:
                t = core.term_at(c)
                if t is not None and t != committed[c - 1]:
                    raise fail(
                        "state machine safety",
                        f"node {core.node_id} considers ({c}, term {t}) committed, "
                        f"but ({c}, term {committed[c - 1]}) was committed",
                    )
            return None
        t = core.term_at(c)
        self_committed = durable_on_quorum is not None and t == core.term and t is not None and durable_on_quorum(c, t)
        if core.role is not Role.LEADER and not self_committed:
            raise fail(
                "commit",
                f"node {core.node_id} ({core.role.value}, term {core.term}) has commit index {c}, "
                f"beyond anything a leader committed ({known})",
            )
        if known > 0:
            t = core.term_at(known)
            if t is not None and t != committed[known - 1]:
                raise fail(
                    "leader completeness",
                    f"{core.role.value} {core.node_id} of term {core.term} commits past {known} without "
                    f"committed entry ({known}, term {committed[known - 1]})",
                )
        for i in range(known + 1, c + 1):
            t = core.term_at(i)
            if t is None:
                raise fail("commit", f"{core.role.value} {core.node_id} commits index {i} it does not hold")
            committed.append(t)
            self.commit_term.append(core.term)
        return known + 1, c

    def check_new_leader(self, core: _CoreView) -> None:
        """A leader of term T holds every entry committed in a term before T (Raft §5.4.1)."""
        committed, commit_term, term = self.committed, self.commit_term, core.term
        compacted = core.first_index - 1
        for i in range(len(committed), compacted, -1):
            if commit_term[i - 1] >= term:
                continue
            t = core.term_at(i)
            if t != committed[i - 1]:
                raise fail(
                    "leader completeness",
                    f"node {core.node_id} leads term {term} without entry ({i}, term {committed[i - 1]}) "
                    f"committed in term {commit_term[i - 1]} (its term there: {t})",
                )
            # Log matching covers everything below a matching entry.
            return

    def check_leader_holds(self, core: _CoreView, first: int, last: int, commit_term: int) -> None:
        """A leader of a term after `commit_term` holds the entries just committed in it."""
        if core.term <= commit_term:
            return
        committed = self.committed
        for i in (last, first):
            if i >= core.first_index - 1 and core.term_at(i) != committed[i - 1]:
                raise fail(
                    "leader completeness",
                    f"node {core.node_id} leads term {core.term} without entry ({i}, term {committed[i - 1]}) "
                    f"committed in term {commit_term}",
                )

    # -- state machine safety ---------------------------------------------------------

    def check_apply(self, node_id: int, e: Entry) -> bool:
        """`node_id` applied `e`; returns True when no node had applied this index before."""
        applied = self.applied
        if e.index <= len(applied):
            known = applied[e.index - 1]
            if known != e:
                raise fail(
                    "state machine safety",
                    f"node {node_id} applied {_show(e)} at index {e.index}, another node applied {_show(known)}",
                )
            return False
        if e.index != len(applied) + 1:
            raise fail("state machine safety", f"node {node_id} applied index {e.index} past a gap")
        applied.append(e)
        return True

    def check_snapshot_payload(self, node_id: int, index: int, term: int, payload: tuple[Entry, ...]) -> None:
        if len(payload) != index or (index and payload[-1].term != term):
            raise fail(
                "state machine safety",
                f"node {node_id} got a snapshot payload of {len(payload)} entries for meta ({index}, term {term})",
            )
        if index > len(self.applied) or (index and self.applied[index - 1] != payload[-1]):
            raise fail("state machine safety", f"node {node_id} got a snapshot at {index} that was never applied")

    # -- durability -------------------------------------------------------------------

    def ack(self, e: Entry) -> None:
        self.acked[e.index] = e

    # -- linearizable reads -----------------------------------------------------------

    def read_issued(self, ctx: bytes) -> None:
        """A read issued now must observe every write committed (a fortiori applied) before now."""
        self.read_bounds[ctx] = max(len(self.applied), len(self.committed))

    def check_read(self, node_id: int, rs: ReadState) -> None:
        bound = self.read_bounds.get(rs.context)
        if bound is None:
            raise fail("linearizable read", f"node {node_id} answered unknown read {rs.context!r}")
        if rs.index < bound:
            raise fail(
                "linearizable read",
                f"node {node_id} answered read {rs.context!r} at index {rs.index}, but index {bound} "
                f"was applied before the read was issued",
            )

    # -- end of run -------------------------------------------------------------------

    def check_final(self, machines: dict[int, list[Entry]]) -> None:
        """Every node's state machine is the same committed prefix and holds every acked proposal."""
        lengths = {n: len(sm) for n, sm in machines.items()}
        if len(set(lengths.values())) != 1:
            raise fail("convergence", f"state machines differ in length: {lengths}")
        applied = self.applied
        for n, sm in machines.items():
            if sm != applied[: len(sm)]:
                raise fail("state machine safety", f"node {n}'s state machine is not the committed prefix")
            for index, e in self.acked.items():
                if index > len(sm) or sm[index - 1] != e:
                    raise fail("durability", f"acknowledged proposal {_show(e)} is missing on node {n}")


def _show(e: Entry) -> str:
    return f"({e.index}, term {e.term}, {e.kind.name} {e.data!r})"
