"""Never two holders acting at once, in zxid order: the check of the lock and election workloads (locks.py).

A holder's tenure, in the cluster's zxid order, runs from `start`, the pzxid of /lock in the read that told
it its node was the lowest, to `end`, the czxid of its last act (every act that took effect, read back from
the cluster after the run, so an act whose client never heard the answer counts too). The recipe makes
tenures disjoint: when holder B's read shows its node the lowest, holder A's node was deleted at a zxid z,
A's acts were all before z (a write of an expired session is refused, ZooKeeper's PrepRequestProcessor
checkSession), and B's start is at least z (pzxid is the zxid of the last child created or deleted). So:
- `two_holders`: a tenure starts at or before another's end -- two holders acted in one zxid interval
  (an act of an expired holder accepted after its lock passed on is the "unsafe lock" of Jepsen's etcd).
- `act_outside_tenure`: an act before its holder's start, or by a holder no worker logged acquiring.
- `acked_act_lost`: an act its holder saw acknowledged is missing from the read-back.
- `acted_after_losing_session`: a worker invoked an act after its client told it SUSPENDED or LOST
  (the holder's own rule, locks.py: it acts only while it can prove its session alive).
The bounds are conservative (a later start, an earlier end), so the check finds no overlap that is not one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.faults.cluster import HostedQuorum
from tests.faults.netns import Host
from tests.faults.workload import Checked, Records
from tests.quorum_harness import REPO_ROOT, subprocess_env

DUMP_TIMEOUT_S = 60.0
# Read while a fault may have left no quorum (a run that did not converge): bounded, and only evidence.
LOCK_NODES_TIMEOUT_S = 20.0
# Kinds after which a holder may not act until it acquires afresh.
LOSING = ("suspended", "lost")
EXPLAINED_MAX = 5  # overlapping tenures spelled out (one late act overlaps every tenure after it)


@dataclass(frozen=True, slots=True)
class Tenure:
    holder: str
    worker: int
    session: str
    start: int
    end: int


def acts_file(root: Path, recipe: str) -> Path:
    return root / f"acts-{recipe}.jsonl"


def lock_nodes_file(root: Path, recipe: str) -> Path:
    """The lock nodes read while the workers still ran (locks.py's after-stop read names its own file)."""
    return root / f"lock-nodes-{recipe}-before-stop.jsonl"


def _read_back(cluster: HostedQuorum, probe: Host, recipe: str, out: Path, timeout_s: float, *flags: str) -> None:
    """locks.py --dump from the probe host through every node (a sync first, so any node answers current)."""
    hosts = ",".join(cluster.zk_address(n) for n in sorted(cluster.hosts))
    argv = [sys.executable, "-m", "tests.faults.locks", "--dump", *flags, "--recipe", recipe, "--hosts", hosts,
            "--out", str(out)]  # fmt: skip
    try:
        done = probe.run(argv, timeout_s, capture_output=True, text=True, cwd=REPO_ROOT, env=subprocess_env())
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"reading {out.name} back took over {timeout_s:g} s") from exc
    if done.returncode != 0:
        raise RuntimeError(f"reading {out.name} back failed: {done.stderr.strip()[-500:]}")


def dump_acts(cluster: HostedQuorum, probe: Host, root: Path, recipe: str) -> None:
    """Read every act znode back through the healed cluster (from the probe host) into acts-<recipe>.jsonl."""
    _read_back(cluster, probe, recipe, acts_file(root, recipe), DUMP_TIMEOUT_S)


def dump_lock_nodes(cluster: HostedQuorum, probe: Host, root: Path, recipe: str) -> None:
    """The lock nodes and their owner sessions while the workers still hold their sessions (once they stop,
    their sessions close and the nodes go): the evidence of a lock that nobody could take."""
    _read_back(cluster, probe, recipe, lock_nodes_file(root, recipe), LOCK_NODES_TIMEOUT_S, "--lock-nodes-only")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def read_acts(root: Path, recipe: str) -> list[dict[str, Any]]:
    return read_jsonl(acts_file(root, recipe))


def describe_lock_nodes(nodes: list[dict[str, Any]], records: Records) -> str:
    """One line per lock node, lowest first: its owner session and which worker that session is (the
    session every history line names), with that worker's last line -- so a stuck lock reads as data."""
    if not nodes:
        return "lock nodes before the workers stopped: none"
    last_line: dict[str, tuple[int, dict[str, Any]]] = {}
    for worker, rows in records.items():
        for r in rows:
            last_line[r["session"]] = (worker, r)  # rows are in the order written: the last one wins
    out = ["lock nodes before the workers stopped (lowest holds the lock):"]
    for node in nodes:
        owner = node["owner"]
        if owner in last_line:
            worker, r = last_line[owner]
            whose = f"worker {worker}'s session, whose last line is {r['k']} of {r.get('holder', '-')} at {r['i']:.3f}"
        else:
            whose = "a session no worker logged"
        out.append(f"  {node['node']} (czxid {node['czxid']}) owned by {owner}: {whose}")
    return "\n".join(out)


def tenures(records: Records, acts: list[dict[str, Any]]) -> tuple[list[Tenure], list[str]]:
    """Each acquiring holder's tenure; and the acts that fall outside every tenure, explained."""
    acquired = {r["holder"]: (w, r) for w, rows in records.items() for r in rows if r["k"] == "acquire" and r["lowest"]}
    by_holder: dict[str, list[int]] = {}
    outside = []
    for act in acts:
        if act["holder"] not in acquired:
            outside.append(f"act {act['path']} (zxid {act['zxid']}) by {act['holder']}: no worker acquired it")
            continue
        by_holder.setdefault(act["holder"], []).append(act["zxid"])
    out = []
    for holder, (worker, r) in acquired.items():
        zxids = by_holder.get(holder, [])
        early = [z for z in zxids if z <= r["zxid"]]
        if early:
            outside.append(f"{holder} (worker {worker}) acted at zxid {early[0]} before its start {r['zxid']}")
        out.append(Tenure(holder, worker, r["session"], r["zxid"], max(zxids, default=r["zxid"])))
    return sorted(out, key=lambda t: t.start), outside


def overlaps(ordered: list[Tenure]) -> list[str]:
    """Tenures (by start) that begin at or before an earlier one ended."""
    found = []
    latest: Tenure | None = None
    for t in ordered:
        if latest is not None and t.start <= latest.end:
            found.append(
                f"{t.holder} (worker {t.worker}, session {t.session}) holds from zxid {t.start}, while "
                f"{latest.holder} (worker {latest.worker}, session {latest.session}) acted until zxid {latest.end}"
            )
        if latest is None or t.end > latest.end:
            latest = t
    return found


def acted_after_losing(records: Records) -> list[str]:
    """Acts a worker invoked after SUSPENDED or LOST and before its next acquire."""
    found = []
    for worker, rows in sorted(records.items()):
        lost_at: float | None = None
        for r in sorted(rows, key=lambda r: r["i"]):
            if r["k"] in LOSING:
                lost_at = r["i"]
            elif r["k"] == "acquire":
                lost_at = None if r["i"] > (lost_at or 0) else lost_at
            elif r["k"] == "act" and lost_at is not None:
                found.append(f"worker {worker} acted at {r['i']:.3f} after losing its session at {lost_at:.3f}")
    return found


def check(records: Records, acts: list[dict[str, Any]]) -> Checked:
    rows = [r for rs in records.values() for r in rs]
    checked = Checked(operations=sum(1 for r in rows if r["k"] in ("acquire", "act", "release")))
    checked.unknown = sum(1 for r in rows if r["k"] in ("act", "release") and r["c"] is None)
    checked.unknown_causes.update(r["why"] for r in rows if r["k"] in ("act", "release") and "why" in r)
    ordered, outside = tenures(records, acts)
    if outside:
        checked.add("act_outside_tenure", "\n".join(outside))
    both = overlaps(ordered)
    if both:
        more = [f"... and {len(both) - EXPLAINED_MAX} more"] if len(both) > EXPLAINED_MAX else []
        checked.add("two_holders", "\n".join(both[:EXPLAINED_MAX] + more))
    read_back = {a["path"] for a in acts}
    lost = [r for r in rows if r["k"] == "act" and r["c"] is not None and r["path"].rsplit("/", 1)[-1] not in read_back]
    if lost:
        checked.add("acked_act_lost", "\n".join(f"{r['path']} (zxid {r['zxid']}) by {r['holder']}" for r in lost))
    after = acted_after_losing(records)
    if after:
        checked.add("acted_after_losing_session", "\n".join(after))
    return checked
