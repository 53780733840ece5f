"""One seeded fault run: hosts, a 3-node quorum, workload clients, a schedule of faults, a checked history.

    result = run_once(seed=7, kinds=("split", "pause"), root=Path("run-7"), workload="lock")
    print(result.line())     # seed=7 workload=lock faults=split(leader,3.1s),... ops=812 ... anomalies=none

The seed decides everything that is not timing: which faults (unless `kinds` is given), whom each hits
(the leader or a follower, resolved when the fault starts), how long it holds, and every client's
operations. A run goes: warm up, then for each fault: apply, hold, heal, and wait until every client has
had a write acknowledged (the time from the heal to that is the run's convergence figure, bounded by
CONVERGE_DEADLINE_S), and until the fault's target has applied what the leader had committed (caught_up_s:
a node cut off, paused, restarted or with its log's tail torn is a working replica again); then let the
workload read what only its live sessions show (before_stop: who holds each lock node), stop the clients,
let the workload collect what it reads back from the healed cluster, and check the history with the
workload's checker (workload.py; the register's: linearizability, tests/linearizability.py) and the
sessions (sessions_check.py: none expired while it was being served).
Faults hold longer than both the election timeout and the session timeout, so that leaders change and
sessions may expire while they last.

Fault kinds (node N is the target, its clients' home is node N):
  isolate  N's cable pulled: no node or client reaches it
  split    N and the client homed on it on one side, the other nodes and clients on the other
  bridge   the two other nodes cut from each other; N still sees both
  oneway   N's packets to the other nodes lost; theirs to N still arrive
  pause    N stopped with SIGSTOP, then SIGCONT
  kill     N SIGKILLed, then started again on its data
  disk     N's fsyncs fail (runtime.failpoints): it must stop, exit code 1, acknowledging nothing; the heal
           starts it again on a working disk
  torn     N SIGKILLed, the last record of its write-ahead log torn (tests/faults/torn.py), started again
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.faults import catch_up
from tests.faults.cluster import ELECTION_TIMEOUT_S, HostedQuorum
from tests.faults.injector import apply
from tests.faults.netns import Host, Network
from tests.faults.workload import OP_TIMEOUT_S, SESSION_S, Workload
from tests.faults.workloads import operations, resolve
from tests.helpers import poll_for
from tests.quorum_harness import REPO_ROOT, subprocess_env

__all__ = ["operations"]  # the register's history as the checker's operations, where tests used to find it

FAULT_KINDS = ("isolate", "split", "bridge", "oneway", "pause", "kill", "disk", "torn")
# The kinds the campaign began with are drawn from the run's own random stream; "disk" and "torn" replace a
# drawn kind from a stream of their own, so the seeds of runs made before they existed replay the same run.
_FIRST_KINDS = FAULT_KINDS[:6]
_DISK_KINDS = FAULT_KINDS[6:]
NODES = 3
# Every fault holds longer than the session and election timeouts, plus a margin.
HOLD_MIN_S = max(SESSION_S, ELECTION_TIMEOUT_S) + 0.5
HOLD_MAX_S = HOLD_MIN_S + 1.5
LEADER_DEADLINE_S = 60.0
READY_DEADLINE_S = 60.0
CONVERGE_DEADLINE_S = 30.0
# From the heal until the fault's target has applied what the leader had committed when first asked after it:
# generous, as a restarted node's start alone took up to 70 s on the loaded machine (cluster.START_WAIT_S).
CATCH_UP_DEADLINE_S = 60.0
WARMUP_RECORDS = 20
SETTLE_RECORDS = 10
POLL_S = 0.1
STOP_DEADLINE_S = OP_TIMEOUT_S * 2 + 10


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    target: str  # "leader" or "follower": resolved to a node when the fault starts
    hold_s: float

    def __str__(self) -> str:
        return f"{self.kind}({self.target},{self.hold_s:.1f}s)"


def schedule(seed: int, kinds: tuple[str, ...] | None = None, faults: int = 1) -> list[Fault]:
    """The faults of run `seed`: `kinds` in order when given, else `faults` kinds drawn from the seed."""
    rng = random.Random(seed)
    for kind in kinds or ():
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}: one of {', '.join(FAULT_KINDS)}")
    # Kinds are drawn even when given, so that a replay naming a run's kinds draws the same targets and holds.
    drawn = [rng.choice(_FIRST_KINDS) for _ in range(len(kinds) if kinds else faults)]
    disk_rng = random.Random(f"disk-{seed}")
    for i in range(len(drawn)):
        if disk_rng.random() < len(_DISK_KINDS) / len(FAULT_KINDS):
            drawn[i] = disk_rng.choice(_DISK_KINDS)
    chosen = list(kinds) if kinds else drawn
    return [Fault(k, rng.choice(("leader", "follower")), round(rng.uniform(HOLD_MIN_S, HOLD_MAX_S), 2)) for k in chosen]


@dataclass
class RunResult:
    seed: int
    faults: list[Fault]
    workload: str = "register"
    targets: list[int] = field(default_factory=list)
    operations: int = 0
    unknown: int = 0
    unknown_causes: Counter[str] = field(default_factory=Counter)
    convergence_s: list[float] = field(default_factory=list)
    caught_up_s: list[float] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    explanation: str = ""
    evidence: str = ""  # what the workload read while its workers still ran (before_stop), shown with anomalies
    run_s: float = 0.0
    root: Path | None = None

    def line(self) -> str:
        faults = ",".join(f"{f}->n{t}" for f, t in zip(self.faults, self.targets, strict=False))
        converge = ",".join(f"{s:.2f}" for s in self.convergence_s) or "-"
        caught_up = ",".join(f"{s:.2f}" for s in self.caught_up_s) or "-"
        return (
            f"seed={self.seed} workload={self.workload} faults={faults or '-'} ops={self.operations} "
            f"unknown={self.unknown} "
            f"converged_s={converge} caught_up_s={caught_up} anomalies={','.join(self.anomalies) or 'none'} "
            f"run_s={self.run_s:.1f}"
        )

    def replay_command(self) -> str:
        kinds = ",".join(f.kind for f in self.faults)
        return (
            f"python3 scripts/fault_campaign.py --runs 1 --seed {self.seed} --faults {kinds} --workload {self.workload}"
        )


class Clients:
    """One worker of `workload` per client host, worker w homed on node w."""

    def __init__(self, network: Network, cluster: HostedQuorum, root: Path, seed: int, workload: Workload) -> None:
        self.root = root
        self.workload = workload
        self.hosts: dict[int, Host] = {w: network.add_host(f"c{w}") for w in cluster.hosts}
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self._logs: list[IO[bytes]] = []
        ids = sorted(cluster.hosts)
        for w, host in self.hosts.items():
            order = ids[ids.index(w) :] + ids[: ids.index(w)]
            argv = workload.argv(w, seed, [cluster.zk_address(n) for n in order], self.history_path(w))
            log = (root / "logs" / f"client-{w}.log").open("ab")
            self._logs.append(log)
            self.procs[w] = host.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                       text=True, cwd=REPO_ROOT, env=subprocess_env())  # fmt: skip

    def history_path(self, worker: int) -> Path:
        return self.root / f"history-{worker}.jsonl"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_DEADLINE_S
        for w, proc in self.procs.items():
            assert proc.stdout is not None
            remaining_s = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(remaining_s, 0))
            if not ready or proc.stdout.readline().strip() != "ready":
                raise RuntimeError(
                    f"client {w} did not connect within {READY_DEADLINE_S:g} s (see logs/client-{w}.log)"
                )

    def records(self) -> dict[int, list[dict[str, Any]]]:
        """Every worker's operations so far (a worker that wrote none yet has an empty list)."""
        written = history_records(self.root)
        return {w: written.get(w, []) for w in self.procs}

    def stop(self) -> None:
        """Close every worker's stdin (its stop signal) and wait for it; SIGKILL what does not stop."""
        for proc in self.procs.values():
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
        deadline = time.monotonic() + STOP_DEADLINE_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_DEADLINE_S)
        for log in self._logs:
            log.close()


def history_records(root: Path) -> dict[int, list[dict[str, Any]]]:
    """Every worker's operations so far (whole lines only: a line being written is read next time)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(root.glob("history-*.jsonl")):
        text = path.read_text(encoding="utf-8")
        out[int(path.stem.split("-")[1])] = [json.loads(line) for line in text.split("\n")[:-1]]
    return out


def _log(root: Path, event: str, **fields: Any) -> None:
    """One JSON line in root/campaign.log: the schedule as it ran, with monotonic times."""
    with (root / "campaign.log").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"event": event, "t": round(time.monotonic(), 4), **fields}) + "\n")


def _wait_records(clients: Clients, each: int, deadline_s: float) -> bool:
    """Wait until every worker has `each` more lines than now; False at the deadline."""
    start = {w: len(rs) for w, rs in clients.records().items()}
    return bool(
        poll_for(lambda: all(len(rs) >= start[w] + each for w, rs in clients.records().items()), deadline_s, POLL_S)
    )


def _first_acks_after(clients: Clients, healed_s: float) -> float | None:
    """The latest of the workers' first acknowledged writes after `healed_s`; None while one has none."""
    firsts = []
    for rs in clients.records().values():
        acked = [c for c in clients.workload.acked_write_s(rs) if c > healed_s]
        if not acked:
            return None
        firsts.append(min(acked))
    return max(firsts)


def _converged_s(clients: Clients, healed_s: float) -> float | None:
    """Seconds from the heal until every worker had a write acknowledged after it; None at the deadline."""
    remaining_s = healed_s + CONVERGE_DEADLINE_S - time.monotonic()
    if remaining_s <= 0:
        return None
    last_first = poll_for(lambda: _first_acks_after(clients, healed_s), remaining_s, POLL_S)
    return None if last_first is None else last_first - healed_s


def _caught_up_s(cluster: HostedQuorum, watcher: catch_up.Watcher, target: int, healed_s: float) -> float | None:
    """Seconds from the heal until `target` had applied what the leader had committed when asked after the
    heal (catch_up.py); None at the deadline or when the probe failed (its error in campaign.log)."""
    try:
        at_s = watcher.caught_up_at()
    except RuntimeError as exc:
        _log(cluster.root, "catch_up_probe_failed", node=target, error=str(exc))
        return None
    return None if at_s is None else at_s - healed_s


def _leader(cluster: HostedQuorum, probe: Host) -> int | None:
    return poll_for(lambda: cluster.leader(probe), LEADER_DEADLINE_S, POLL_S)


def _resolve(fault: Fault, leader: int, rng: random.Random) -> int:
    if fault.target == "leader":
        return leader
    return rng.choice([n for n in range(1, NODES + 1) if n != leader])


def _inject_all(result: RunResult, network: Network, cluster: HostedQuorum, clients: Clients, probe: Host) -> None:
    rng = random.Random(result.seed + 1)
    if not _wait_records(clients, WARMUP_RECORDS, READY_DEADLINE_S):
        result.anomalies.append("no_progress_before_faults")
        return
    for fault in result.faults:
        leader = _leader(cluster, probe)
        if leader is None:
            result.anomalies.append(f"no_leader_before_{fault.kind}")
            return
        target = _resolve(fault, leader, rng)
        result.targets.append(target)
        _log(cluster.root, "fault_start", fault=str(fault), node=target, leader=leader)
        watcher = catch_up.Watcher(probe, cluster.addresses, target)  # starts up while the fault holds
        try:
            if not _one_fault(result, fault, target, network, cluster, clients, watcher):
                return
        finally:
            watcher.close()
    _wait_records(clients, SETTLE_RECORDS, CONVERGE_DEADLINE_S)


def _one_fault(
    result: RunResult, fault: Fault, target: int, network: Network, cluster: HostedQuorum, clients: Clients,
    watcher: catch_up.Watcher,
) -> bool:  # fmt: skip
    """Apply, hold, heal; then the clients' convergence and the target's catch-up (False: an anomaly)."""
    heal = apply(fault.kind, target, network, cluster, clients.hosts)
    time.sleep(fault.hold_s)  # the fault's scheduled length: time passing is what is tested here
    heal()
    healed_s = time.monotonic()
    watcher.healed(healed_s + CATCH_UP_DEADLINE_S)
    _log(cluster.root, "fault_healed", fault=str(fault), node=target)
    converged = _converged_s(clients, healed_s)
    _log(cluster.root, "converged", fault=str(fault), after_s=converged)
    if converged is None:
        result.anomalies.append(f"not_converged_after_{fault.kind}")
        return False
    result.convergence_s.append(converged)
    if not cluster.alive(target):
        return True  # a disk fault's node that did not stop as it must: the run reports its exit code
    caught_up = _caught_up_s(cluster, watcher, target, healed_s)
    _log(cluster.root, "caught_up", fault=str(fault), node=target, after_s=caught_up)
    if caught_up is None:
        result.anomalies.append(f"not_caught_up_after_{fault.kind}")
        return False
    result.caught_up_s.append(caught_up)
    return True


def _check(result: RunResult, clients: Clients) -> None:
    checked = clients.workload.check(clients.records(), clients.root)
    result.operations = checked.operations
    result.unknown = checked.unknown
    result.unknown_causes = checked.unknown_causes
    result.anomalies.extend(checked.anomalies)
    result.explanation = "\n".join([result.explanation, checked.explanation]).strip()


def _before_stop(result: RunResult, clients: Clients, cluster: HostedQuorum, probe: Host) -> None:
    """What the workload reads while its workers still hold their sessions (who holds each lock node), kept
    in campaign.log and shown with the run's anomalies; a failed read is noted, not an anomaly (a run that
    did not converge may have no quorum to read from)."""
    try:
        result.evidence = clients.workload.before_stop(cluster, probe, clients.root, clients.records())
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        result.evidence = f"{clients.workload.name} read before the workers stopped failed: {exc}"
    if result.evidence:
        _log(cluster.root, "before_stop", evidence=result.evidence)


def _finish(result: RunResult, clients: Clients, cluster: HostedQuorum, probe: Host) -> None:
    """The workload's read-back from the healed cluster (an error there is the run's anomaly, not a crash)."""
    try:
        clients.workload.finish(cluster, probe, clients.root)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        result.anomalies.append("finish_failed")
        result.explanation = f"{clients.workload.name} read-back failed: {exc}"


def start_nodes(cluster: HostedQuorum) -> str | None:
    """Start every node and wait until each logged node_started, with how long that took and the machine's
    load in campaign.log (both campaigns); the anomaly `nodes_not_started:...` when one did not within
    START_WAIT_S, else None."""
    began_s = time.monotonic()
    late = cluster.start_all_and_wait_started()
    _log(cluster.root, "nodes_started", after_s=round(time.monotonic() - began_s, 2), late=late,
         load_avg_1m=os.getloadavg()[0])  # fmt: skip
    return "nodes_not_started:" + "+".join(f"n{n}" for n in late) if late else None


def run_once(
    seed: int, root: Path, kinds: tuple[str, ...] | None = None, faults: int = 1, workload: str = "register"
) -> RunResult:
    """One run of `workload` (a name of workloads.WORKLOADS, or `mix`) in `root` (created; kept by the caller
    when result.anomalies is not empty)."""
    chosen = resolve(workload, seed)
    root.mkdir(parents=True, exist_ok=True)
    result = RunResult(seed, schedule(seed, kinds, faults), chosen.name, root=root)
    _log(root, "schedule", seed=seed, workload=chosen.name, faults=[str(f) for f in result.faults])
    started = time.monotonic()
    with Network() as network, HostedQuorum(network, root, NODES) as cluster:
        probe = network.add_host("probe")
        not_started = start_nodes(cluster)
        if not_started is not None:
            result.anomalies.append(not_started)
            result.run_s = time.monotonic() - started
            return result
        if _leader(cluster, probe) is None:
            result.anomalies.append("no_first_leader")
            result.run_s = time.monotonic() - started
            return result
        clients = Clients(network, cluster, root, seed, chosen)
        try:
            clients.wait_ready()
            _inject_all(result, network, cluster, clients, probe)
            _before_stop(result, clients, cluster, probe)
        except RuntimeError as exc:  # a worker that never got ready: this run's anomaly, not the campaign's end
            result.anomalies.append("clients_not_ready")
            result.explanation = str(exc)
        finally:
            clients.stop()
        _finish(result, clients, cluster, probe)
        failed = {w: proc.returncode for w, proc in clients.procs.items() if proc.returncode != 0}
        if failed:
            result.anomalies.append("client_failed:" + "+".join(f"c{w}={c}" for w, c in sorted(failed.items())))
        exits = {n: code for n, code in cluster.exit_codes().items() if code is not None}
        if exits:
            result.anomalies.append("node_exited:" + "+".join(f"n{n}={c}" for n, c in sorted(exits.items())))
    _check(result, clients)
    if result.anomalies and result.evidence:
        result.explanation = "\n".join([result.explanation, result.evidence]).strip()
    result.run_s = time.monotonic() - started
    _log(root, "result", line=result.line())
    return result
