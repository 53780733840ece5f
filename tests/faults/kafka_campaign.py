"""One seeded Kafka fault run: a quorum and brokers on hosts of their own, producers and a consumer group in
client hosts, a schedule of faults on brokers and quorum nodes, checked histories, one result line.

    result = run_kafka_once(seed=7, root=Path("run-7"), kinds=("broker-split",))
    print(result.line())   # seed=7 faults=broker-split(controller,4.6s)->b2 ops=5120 ... anomalies=none

Hosts: quorum nodes n1..n3, brokers b1..b3, producers p1 p2, group members g1 g2, the ZooKeeper observer
obs (kafka_observer.py), and probe (topic creation, status probes, the final read). The topic has
PARTITIONS partitions with RF=3 and min.insync.replicas=2. A run goes: quorum, observer, brokers, topic,
clients; warm up; for each fault: apply, hold, heal, and wait until every producer has a value acknowledged
after the heal (the time from the heal to the last of those is the Kafka layer's convergence figure); then
settle, stop the clients, read every partition from its beginning, and check (kafka_check.py).

Fault kinds (the target is drawn from the seed and resolved when the fault starts):
  broker-isolate  the broker's cable pulled (target: the controller, or partition 0's leader)
  broker-split    the broker cut from every quorum node; brokers and clients still reach it
  broker-pause    the broker SIGSTOPped, then SIGCONT
  broker-kill     the broker SIGKILLed, then started again on its data
  quorum-isolate  a quorum node's cable pulled (target: the quorum's leader or a follower)
  quorum-split    a quorum node cut from every other host
  quorum-pause    a quorum node SIGSTOPped, then SIGCONT
  quorum-kill     a quorum node SIGKILLed, then started again
  group-isolate   a group member's cable pulled (target: a member drawn from the seed)
  group-pause     a group member SIGSTOPped, then SIGCONT: a zombie member that may try to commit
Faults hold longer than the brokers' ZooKeeper session, replica.lag.time.max.ms and the members' group
session (3 s), so registrations expire, the controller moves, ISRs shrink and the group rebalances while
they last.
"""

from __future__ import annotations

import json
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.faults import kafka_check
from tests.faults.campaign import Fault, start_nodes
from tests.faults.cluster import HostedQuorum
from tests.faults.kafka_cluster import HostedBrokers
from tests.faults.netns import Host, Network
from tests.helpers import poll_for
from tests.quorum_harness import REPO_ROOT, subprocess_env

# A Fault's target here: broker faults "controller" or "leader", quorum "leader" or "follower", group "member".
FAULT_KINDS = (
    "broker-isolate", "broker-split", "broker-pause", "broker-kill",
    "quorum-isolate", "quorum-split", "quorum-pause", "quorum-kill",
    "group-isolate", "group-pause",
)  # fmt: skip
NODES = 3
BROKERS = 3
PRODUCERS = 2
MEMBERS = 2
TOPIC = "faults"
GROUP = "faults-group"
PARTITIONS = 4
MEMBER_SESSION_MS = 3000
HOLD_MIN_S = 4.0
HOLD_MAX_S = 6.0
START_DEADLINE_S = 120.0
READY_DEADLINE_S = 60.0
CONVERGE_DEADLINE_S = 60.0
TOOL_TIMEOUT_S = 60.0
FINAL_READ_DEADLINE_S = 90.0
# Values each producer has acknowledged on every partition before the faults, and after them.
WARMUP_ACKS = 50
SETTLE_ACKS = 50
POLL_S = 0.2
STOP_DEADLINE_S = 40.0
STARTUP_RESTARTS_MAX = 3


def schedule(seed: int, kinds: tuple[str, ...] | None = None, faults: int = 1) -> list[Fault]:
    """The faults of run `seed`: `kinds` in order when given, else `faults` kinds drawn from the seed."""
    rng = random.Random(seed)
    for kind in kinds or ():
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}: one of {', '.join(FAULT_KINDS)}")
    # Kinds are drawn even when given, so that a replay naming a run's kinds draws the same targets and holds.
    drawn = [rng.choice(FAULT_KINDS) for _ in range(len(kinds) if kinds else faults)]
    chosen = list(kinds) if kinds else drawn
    faults_out = []
    for kind in chosen:
        targets = {"broker": ("controller", "leader"), "quorum": ("leader", "follower"), "group": ("member",)}[
            kind.split("-")[0]
        ]
        faults_out.append(Fault(kind, rng.choice(targets), round(rng.uniform(HOLD_MIN_S, HOLD_MAX_S), 2)))
    return faults_out


@dataclass
class KafkaRunResult:
    """campaign.RunResult's line, for the Kafka layer (targets are host names: b2, n1)."""

    seed: int
    faults: list[Fault]
    targets: list[str] = field(default_factory=list)
    operations: int = 0
    unknown: int = 0
    convergence_s: list[float] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    explanation: str = ""
    run_s: float = 0.0
    root: Path | None = None

    def line(self) -> str:
        faults = ",".join(f"{f}->{t}" for f, t in zip(self.faults, self.targets, strict=False))
        converge = ",".join(f"{s:.2f}" for s in self.convergence_s) or "-"
        return (
            f"seed={self.seed} faults={faults or '-'} ops={self.operations} unknown={self.unknown} "
            f"converged_s={converge} anomalies={','.join(self.anomalies) or 'none'} run_s={self.run_s:.1f}"
        )

    def replay_command(self) -> str:
        kinds = ",".join(f.kind for f in self.faults)
        return f"python3 scripts/fault_campaign_kafka.py --runs 1 --seed {self.seed} --faults {kinds}"


def _log(root: Path, event: str, **fields: Any) -> None:
    """One JSON line in root/campaign.log: the schedule as it ran, with monotonic times."""
    with (root / "campaign.log").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"event": event, "t": round(time.monotonic(), 4), **fields}) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole lines only: a line being written is read next time."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1]]


class Workers:
    """The client processes: observer, producers and group members, each in a host of its own."""

    def __init__(self, network: Network, root: Path) -> None:
        self.network, self.root = network, root
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self._logs: list[IO[bytes]] = []

    def start(self, name: str, host: Host, module: str, *args: str) -> None:
        log = (self.root / "logs" / f"{name}.log").open("ab")
        self._logs.append(log)
        argv = [sys.executable, "-m", f"tests.faults.{module}", *args, "--out", str(self.history(name))]
        self.procs[name] = host.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                      cwd=REPO_ROOT, env=subprocess_env())  # fmt: skip

    def history(self, name: str) -> Path:
        return self.root / f"history-{name}.jsonl"

    def records(self, name: str) -> list[dict[str, Any]]:
        return read_jsonl(self.history(name))

    def wait_ready(self, names: list[str]) -> None:
        deadline = time.monotonic() + READY_DEADLINE_S
        for name in names:
            stdout = self.procs[name].stdout
            assert stdout is not None
            ready, _, _ = select.select([stdout], [], [], max(deadline - time.monotonic(), 0))
            if not ready or stdout.readline().strip() != "ready":
                raise RuntimeError(f"{name} did not start within {READY_DEADLINE_S:g} s (see logs/{name}.log)")

    def stop(self, names: list[str]) -> None:
        """Close each one's stdin (its stop signal) and wait for it; SIGKILL what does not stop."""
        for name in names:
            proc = self.procs[name]
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
        deadline = time.monotonic() + STOP_DEADLINE_S
        for name in names:
            proc = self.procs[name]
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_DEADLINE_S)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=STOP_DEADLINE_S)
        for log in self._logs:
            log.close()


@dataclass
class Run:
    """Everything one run holds on to."""

    result: KafkaRunResult
    network: Network
    quorum: HostedQuorum
    brokers: HostedBrokers
    workers: Workers
    probe: Host
    producers: list[str] = field(default_factory=lambda: [f"p{i}" for i in range(1, PRODUCERS + 1)])
    members: list[str] = field(default_factory=lambda: [f"g{i}" for i in range(1, MEMBERS + 1)])

    @property
    def root(self) -> Path:
        return self.quorum.root

    def observed(self) -> list[dict[str, Any]]:
        return self.workers.records("obs")

    def latest(self) -> dict[str, Any] | None:
        seen = self.observed()
        return seen[-1] if seen else None

    def acks(self) -> dict[tuple[str, int], list[float]]:
        """Acknowledgement times so far, by producer and partition."""
        out: dict[tuple[str, int], list[float]] = {(p, part): [] for p in self.producers for part in range(PARTITIONS)}
        for p in self.producers:
            for r in self.workers.records(p):
                if r.get("c") is not None:
                    out[(p, r["part"])].append(r["c"])
        return out

    def commits(self) -> dict[str, int]:
        """How many commits each group member had acknowledged so far."""
        return {m: sum(1 for r in self.workers.records(m) if r["ev"] == "commit") for m in self.members}

    def tool(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A command run inside the probe host (what a user types on a machine of the network)."""
        return self.probe.run(argv, timeout_s=TOOL_TIMEOUT_S, capture_output=True, text=True, cwd=REPO_ROOT,
                              env=subprocess_env())  # fmt: skip


def _start_cluster(run: Run) -> str | None:
    """Quorum, observer, brokers and the topic; the anomaly when one does not come up in time."""
    not_started = start_nodes(run.quorum)
    if not_started is not None:
        return not_started
    if poll_for(lambda: run.quorum.leader(run.probe), START_DEADLINE_S, POLL_S) is None:
        return "no_first_leader"
    zk = run.brokers.zookeeper_connect
    wire = run.brokers.zookeeper_wire
    run.workers.start("obs", run.network.add_host("obs"), "kafka_observer", "--hosts", wire, "--topic", TOPIC,
                      "--partitions", str(PARTITIONS))  # fmt: skip
    run.workers.wait_ready(["obs"])
    run.brokers.start_all()
    restarts = dict.fromkeys(run.brokers.hosts, STARTUP_RESTARTS_MAX)

    def registered() -> bool:
        _restart_exited(run, restarts)
        snap = run.latest()
        return snap is not None and snap["brokers"] == list(run.brokers.hosts) and snap["controller"] is not None

    if poll_for(registered, START_DEADLINE_S, POLL_S) is None:
        return "brokers_not_registered"
    done = run.tool([
        sys.executable, "-m", "zkraft", "topics", "--zookeeper", zk, "--create", "--topic", TOPIC,
        "--partitions", str(PARTITIONS), "--replication-factor", str(BROKERS), "--config", "min.insync.replicas=2",
    ])  # fmt: skip
    if done.returncode != 0:
        run.result.explanation = f"zkraft topics --create: {done.stderr.strip()[-500:]}"
        return "topic_create_failed"

    def online() -> bool:
        snap = run.latest()
        states = [] if snap is None else list(snap["states"].values())
        return len(states) == PARTITIONS and all(s is not None and len(s["isr"]) == BROKERS for s in states)

    return None if poll_for(online, START_DEADLINE_S, POLL_S) else "topic_not_online"


def _restart_exited(run: Run, restarts: dict[int, int]) -> None:
    """Start again, as a service manager would (Restart=on-failure), a broker that exited during start-up: as
    Kafka's does, a broker whose ZooKeeper session expires before it is up exits (KafkaServer.startup's fatal
    error), which a loaded machine and 3 s sessions make possible. Counted in campaign.log; a broker that
    keeps exiting is left down and the run reports it."""
    for broker_id, left in restarts.items():
        if run.brokers.alive(broker_id) or left == 0:
            continue
        last = (_text_lines(run.brokers.log_path(broker_id)) or [""])[-1]
        _log(run.root, "broker_restarted_after_startup_exit", broker=broker_id, last_line=last[-300:])
        restarts[broker_id] = left - 1
        run.brokers.kill(broker_id)  # reaps it and closes its log
        run.brokers.start(broker_id)


def _start_clients(run: Run) -> None:
    boot = run.brokers.bootstrap_servers
    for i, name in enumerate(run.producers, start=1):
        run.workers.start(name, run.network.add_host(name), "kafka_producer", "--bootstrap", boot,
                          "--producer", str(i), "--topic", TOPIC, "--partitions", str(PARTITIONS))  # fmt: skip
    for i, name in enumerate(run.members, start=1):
        run.workers.start(name, run.network.add_host(name), "kafka_consumer", "--bootstrap", boot,
                          "--member", str(i), "--group", GROUP, "--topic", TOPIC,
                          "--session-ms", str(MEMBER_SESSION_MS))  # fmt: skip
    run.workers.wait_ready(run.producers + run.members)


def _resolve(run: Run, fault: Fault, rng: random.Random) -> tuple[str, int] | None:
    """The host kind ('b', 'n' or 'g') and id the fault hits; None when the target has no holder now."""
    if fault.kind.startswith("group-"):
        return ("g", rng.randint(1, MEMBERS))
    if fault.kind.startswith("broker-"):
        snap = run.latest()
        if snap is None:
            return None
        state = snap["states"].get("0")
        who = snap["controller"] if fault.target == "controller" else (state or {}).get("leader")
        return None if who is None or who < 0 else ("b", int(who))
    leader = poll_for(lambda: run.quorum.leader(run.probe), START_DEADLINE_S, POLL_S)
    if leader is None:
        return None
    if fault.target == "leader":
        return ("n", int(leader))  # type: ignore[call-overload]
    return ("n", rng.choice([n for n in run.quorum.hosts if n != leader]))


def _apply(run: Run, kind: str, host_kind: str, target: int) -> Callable[[], None]:
    """Start fault `kind` on broker, node or group member `target`; return the function that heals it."""
    net = run.network
    action = kind.split("-", 1)[1]
    if host_kind == "g":
        return _apply_to_member(run, action, target)
    host = (run.brokers.hosts if host_kind == "b" else run.quorum.hosts)[target]
    if action == "isolate":
        net.isolate(host)
        return net.heal
    if action == "split":
        if host_kind == "b":
            net.partition([host], list(run.quorum.hosts.values()))
        else:
            net.partition([host], [h for h in net.hosts.values() if h != host])
        return net.heal
    processes: Any = run.brokers if host_kind == "b" else run.quorum
    if action == "pause":
        processes.pause(target)
        return lambda: processes.resume(target)
    if action == "kill":
        processes.kill(target)
        return lambda: processes.start(target)
    raise ValueError(f"unknown fault kind {kind!r}")


def _apply_to_member(run: Run, action: str, member: int) -> Callable[[], None]:
    name = f"g{member}"
    if action == "isolate":
        run.network.isolate(run.network.hosts[name])
        return run.network.heal
    if action == "pause":
        proc = run.workers.procs[name]
        proc.send_signal(signal.SIGSTOP)
        return lambda: proc.send_signal(signal.SIGCONT)
    raise ValueError(f"unknown group fault {action!r}")


def _converged_s(run: Run, healed_s: float) -> float | None:
    """Seconds from the heal until every producer had a value acknowledged after it on every partition (the
    whole topic writable again, not only the partitions the fault left alone); None at the deadline."""

    def last_first_ack() -> float | None:
        firsts = []
        for times in run.acks().values():
            after = [c for c in times if c > healed_s]
            if not after:
                return None
            firsts.append(min(after))
        return max(firsts)

    found = poll_for(last_first_ack, CONVERGE_DEADLINE_S, POLL_S)
    return None if found is None else float(found) - healed_s  # type: ignore[arg-type]


def _wait_progress(run: Run, acks_each: int, deadline_s: float) -> bool:
    """Wait until every producer has `acks_each` more values acknowledged on every partition and every group
    member one more commit acknowledged; False at the deadline."""
    acks, commits = run.acks(), run.commits()

    def done() -> bool:
        now_acks, now_commits = run.acks(), run.commits()
        return all(len(t) >= len(acks[k]) + acks_each for k, t in now_acks.items()) and all(
            n > commits[m] for m, n in now_commits.items()
        )

    return bool(poll_for(done, deadline_s, POLL_S))


def _inject_all(run: Run) -> None:
    result = run.result
    rng = random.Random(result.seed + 1)
    if not _wait_progress(run, WARMUP_ACKS, READY_DEADLINE_S):
        result.anomalies.append("no_progress_before_faults")
        return
    for fault in result.faults:
        resolved = _resolve(run, fault, rng)
        if resolved is None:
            result.anomalies.append(f"no_target_for_{fault.kind}")
            return
        host_kind, target = resolved
        result.targets.append(f"{host_kind}{target}")
        _log(run.root, "fault_start", fault=str(fault), target=f"{host_kind}{target}")
        heal = _apply(run, fault.kind, host_kind, target)
        time.sleep(fault.hold_s)  # the fault's scheduled length: time passing is what is tested here
        heal()
        healed_s = time.monotonic()
        _log(run.root, "fault_healed", fault=str(fault), target=f"{host_kind}{target}")
        converged = _converged_s(run, healed_s)
        _log(run.root, "converged", fault=str(fault), after_s=converged)
        if converged is None:
            result.anomalies.append(f"not_converged_after_{fault.kind}")
            return
        result.convergence_s.append(converged)
    if not _wait_progress(run, SETTLE_ACKS, CONVERGE_DEADLINE_S):
        result.anomalies.append("no_progress_after_faults")


def _final_read(run: Run) -> dict[int, list[tuple[int, str]]] | None:
    out = run.root / "final.json"
    done = run.probe.run(
        [sys.executable, "-m", "tests.faults.kafka_read_all", "--bootstrap", run.brokers.bootstrap_servers,
         "--topic", TOPIC, "--partitions", str(PARTITIONS), "--out", str(out),
         "--deadline-s", str(FINAL_READ_DEADLINE_S)],
        timeout_s=FINAL_READ_DEADLINE_S + 30, capture_output=True, text=True, cwd=REPO_ROOT, env=subprocess_env(),
    )  # fmt: skip
    if done.returncode != 0:
        run.result.explanation = done.stderr.strip()[-500:]
        return None
    return {int(p): [(o, v) for o, v in rows] for p, rows in json.loads(out.read_text(encoding="utf-8")).items()}


def _text_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []


def _check(run: Run, final: dict[int, list[tuple[int, str]]]) -> None:
    result = run.result
    produced = [r for p in run.producers for r in run.workers.records(p)]
    members = [r for m in run.members for r in run.workers.records(m)]
    result.operations = sum(1 for r in produced if "s" in r) + sum(1 for r in members if r["ev"] == "commit")
    result.unknown = sum(1 for r in produced if "s" in r and r["c"] is None)
    found: dict[str, list[str]] = dict(kafka_check.produced(produced, final))
    found["group_generation_shared"] = kafka_check.group(members)
    found["committed_offset_went_back"] = kafka_check.commits(members)
    logs = {b: _text_lines(run.brokers.state_change_log(b)) for b in run.brokers.hosts}
    decided = [d for lines in logs.values() for d in kafka_check.decisions(lines)]
    found["controller_epochs"] = kafka_check.controller(decided, run.observed())
    found["leader_epoch_went_back"] = kafka_check.leader_epochs(run.observed())
    found["leader_epoch_led_twice"] = kafka_check.leader_starts(logs)
    for kind, lines in found.items():
        if lines:
            result.anomalies.append(kind)
            result.explanation = "\n".join([result.explanation, *lines]).strip()
    if not any(r.get("ev") == "assign" and r.get("gen") is not None for r in members):
        result.anomalies.append("no_group_assignment_seen")


def _run(run: Run) -> None:
    result = run.result
    problem = _start_cluster(run)
    if problem is not None:
        result.anomalies.append(problem)
        return
    _start_clients(run)
    _inject_all(run)
    run.workers.stop(run.producers + run.members)
    failed = {n: run.workers.procs[n].returncode for n in run.producers + run.members}
    failed = {n: code for n, code in failed.items() if code != 0}
    if failed:
        result.anomalies.append("client_failed:" + "+".join(f"{n}={c}" for n, c in sorted(failed.items())))
    final = _final_read(run)
    if final is None:
        result.anomalies.append("final_read_failed")
        return
    run.workers.stop(["obs"])
    _check(run, final)


def _note_exits(run: Run) -> None:
    """A broker or quorum node that exited by itself (a killed one is restarted, so it runs) is an anomaly."""
    exits = {f"b{b}": code for b, code in run.brokers.exit_codes().items() if code is not None}
    exits |= {f"n{n}": code for n, code in run.quorum.exit_codes().items() if code is not None}
    if exits:
        run.result.anomalies.append("exited:" + "+".join(f"{h}={c}" for h, c in sorted(exits.items())))


def run_kafka_once(seed: int, root: Path, kinds: tuple[str, ...] | None = None, faults: int = 1) -> KafkaRunResult:
    """One run in `root` (created; kept by the caller when result.anomalies is not empty)."""
    root.mkdir(parents=True, exist_ok=True)
    result = KafkaRunResult(seed, schedule(seed, kinds, faults), root=root)
    _log(root, "schedule", seed=seed, faults=[str(f) for f in result.faults])
    started = time.monotonic()
    with Network() as network, HostedQuorum(network, root, NODES) as quorum:
        with HostedBrokers(network, quorum, root, BROKERS) as brokers:
            workers = Workers(network, root)
            run = Run(result, network, quorum, brokers, workers, network.add_host("probe"))
            try:
                _run(run)
                _note_exits(run)
            finally:
                workers.close()
    result.run_s = time.monotonic() - started
    _log(root, "result", line=result.line())
    return result
