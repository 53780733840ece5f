"""The campaign's workloads by name (the `Workload` protocol is in workload.py).

register  versioned compare-and-set and sync-then-read on one znode; checked for linearizability.
lock      kazoo's Lock recipe (ephemeral sequential znodes); never two holders acting at once (locks_check.py).
election  kazoo's Election recipe, the same znodes behind a leader's run; at most one leader acting at once.
curator   Apache Curator's InterProcessMutex in a JVM, checked as the lock is (needs java, javac and mvn).
sessions  ephemerals of clients heartbeating through the faults; none outlives its expired session.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.faults import curator, locks_check
from tests.faults import sessions_workload as sessions
from tests.faults.cluster import HostedQuorum
from tests.faults.netns import Host
from tests.faults.register import INITIAL_VALUE
from tests.faults.sessions_check import expired_while_active
from tests.faults.workload import (
    SESSION_MARGIN_S,
    SESSION_S,
    Checked,
    Records,
    Rows,
    Workload,
    unknown_causes,
    worker_argv,
)
from tests.linearizability import CheckBudgetExceeded, Kind, Operation, RegisterState, check


def operations(records: Records) -> list[Operation]:
    """The register workers' lines as the linearizability checker's operations."""
    lines = sorted((r for rs in records.values() for r in rs), key=lambda r: r["i"])
    ops = []
    for op_id, r in enumerate(lines):
        kind = Kind(r["k"])
        known = r["c"] is not None
        ops.append(Operation(
            op_id, r["p"], kind, r["i"], r["c"],
            value=r["v"].encode() if "v" in r else None,
            version=r.get("ver") if known else None,
            expected_version=r.get("ev"),
            succeeded=r.get("ok") if kind is Kind.CAS and known else None,
        ))  # fmt: skip
    return ops


def check_sessions(checked: Checked, records: Records) -> None:
    """No session expired while its worker kept having writes acknowledged (sessions_check.py)."""
    expired = expired_while_active(records, SESSION_S, SESSION_MARGIN_S)
    if expired:
        checked.add("session_expired_while_served", "\n".join(expired))


class RegisterWorkload:
    name = "register"

    def argv(self, worker: int, seed: int, hosts: list[str], out: Path) -> list[str]:
        return worker_argv("tests.faults.register", worker, seed, hosts, out)

    def acked_write_s(self, rows: Rows) -> list[float]:
        return [r["c"] for r in rows if r["k"] != "read" and r["c"] is not None and r.get("ok")]

    def before_stop(self, cluster: HostedQuorum, probe: Host, root: Path, records: Records) -> str:
        return ""

    def finish(self, cluster: HostedQuorum, probe: Host, root: Path) -> None:
        return None

    def check(self, records: Records, root: Path) -> Checked:
        ops = operations(records)
        checked = Checked(len(ops), sum(1 for op in ops if not op.known), unknown_causes(records))
        try:
            verdict = check(ops, RegisterState(INITIAL_VALUE, 0))
        except CheckBudgetExceeded as exc:
            checked.add("check_inconclusive", str(exc))
            return checked
        if not verdict.linearizable:
            checked.add("nonlinearizable", verdict.explain())
        check_sessions(checked, records)
        return checked


class RecipeWorkload:
    """kazoo's Lock or Election recipe: holders log what they saw, act, and the acts are read back at the end."""

    def __init__(self, recipe: str) -> None:
        self.name = recipe

    def argv(self, worker: int, seed: int, hosts: list[str], out: Path) -> list[str]:
        return worker_argv("tests.faults.locks", worker, seed, hosts, out) + ["--recipe", self.name]

    def acked_write_s(self, rows: Rows) -> list[float]:
        return [r["c"] for r in rows if r["k"] == "act" and r["c"] is not None]

    def before_stop(self, cluster: HostedQuorum, probe: Host, root: Path, records: Records) -> str:
        locks_check.dump_lock_nodes(cluster, probe, root, self.name)
        nodes = locks_check.read_jsonl(locks_check.lock_nodes_file(root, self.name))
        return locks_check.describe_lock_nodes(nodes, records)

    def finish(self, cluster: HostedQuorum, probe: Host, root: Path) -> None:
        locks_check.dump_acts(cluster, probe, root, self.name)

    def check(self, records: Records, root: Path) -> Checked:
        checked = locks_check.check(records, locks_check.read_acts(root, self.name))
        check_sessions(checked, records)
        return checked


class CuratorWorkload(RecipeWorkload):
    """The lock workload with Apache Curator's InterProcessMutex in a JVM (tests/faults/curator.py)."""

    def __init__(self) -> None:
        super().__init__("curator")

    def argv(self, worker: int, seed: int, hosts: list[str], out: Path) -> list[str]:
        return curator.worker_argv(worker, seed, hosts, out)

    def unavailable_reason(self) -> str | None:
        return curator.unavailable_reason()


class SessionsWorkload:
    name = "sessions"

    def argv(self, worker: int, seed: int, hosts: list[str], out: Path) -> list[str]:
        return worker_argv("tests.faults.sessions_workload", worker, seed, hosts, out)

    def acked_write_s(self, rows: Rows) -> list[float]:
        return [r["c"] for r in rows if r["k"] == "create" and r["c"] is not None and r.get("ok")]

    def before_stop(self, cluster: HostedQuorum, probe: Host, root: Path, records: Records) -> str:
        return ""

    def finish(self, cluster: HostedQuorum, probe: Host, root: Path) -> None:
        sessions.dump_ephemerals(cluster, probe, root)

    def check(self, records: Records, root: Path) -> Checked:
        checked = sessions.check(records, sessions.read_ephemerals(root))
        check_sessions(checked, records)
        return checked


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        RegisterWorkload(),
        RecipeWorkload("lock"),
        RecipeWorkload("election"),
        CuratorWorkload(),
        SessionsWorkload(),
    )
}
# `--workload mix`: each run's workload drawn from its seed (its own generator: the faults drawn stay the same),
# among those that can run here (a workload may say why not with `unavailable_reason()`: no JDK, say).
MIX = "mix"
MIX_SALT = 29_0001


def available() -> list[str]:
    """The names of the workloads that can run on this machine, sorted."""
    reasons = {name: getattr(w, "unavailable_reason", lambda: None)() for name, w in WORKLOADS.items()}
    return sorted(name for name, reason in reasons.items() if reason is None)


def resolve(name: str, seed: int) -> Workload:
    """The workload `name`, or for `mix` the one run `seed` draws; a clear error for an unknown name."""
    if name == MIX:
        return WORKLOADS[random.Random(seed * MIX_SALT).choice(available())]
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}: one of {', '.join([*WORKLOADS, MIX])}")
    return WORKLOADS[name]
