"""What the campaign runs in its client hosts: a workload, named on the command line (`--workload lock`).

A workload is five things (the `Workload` protocol), and nothing else about a run depends on which one runs:
- `argv(worker, seed, hosts, out)`: the worker process started in client host `worker` (worker w homed on
  node w: `hosts` lists its home node first). The worker contract: print `ready` on stdout once connected,
  append one JSON line per operation to `out` ({"p": process, "k": kind, "i": invoke_s, "c": complete_s or
  null, ...} with the machine's monotonic clock, shared by every namespace), stop when its stdin closes.
- `acked_write_s(rows)`: the completion times of the worker's acknowledged writes -- what the convergence
  figure waits for after each heal (every worker has one after the heal).
- `before_stop(cluster, probe, root, records)`: after the faults, while the workers still run, collect what
  only live sessions show (say, which session holds each lock node) into files under `root`, and return
  it described for a person (printed with the run's anomalies); may return "".
- `finish(cluster, probe, root)`: after the workers stopped and the faults healed, collect what only the
  cluster can tell (say, every znode the holders created) into files under `root`; may do nothing.
- `check(records, root)`: the history's verdict, a `Checked`.

The campaign and scripts/fault_campaign.py look workloads up by name in `WORKLOADS` (filled in
tests/faults/workloads.py, so that this module imports nothing of theirs): a new workload is a class with
these five methods and one line there.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tests.faults.cluster import HostedQuorum
    from tests.faults.netns import Host

# Every worker's session and per-call timeouts (faults hold longer than the session: see campaign.py).
SESSION_S = 2.0
OP_TIMEOUT_S = 3.0
# How much earlier than its timeout after an acknowledged write a session may be found expired (the touch's
# trip from a follower to the leader, tickTime / 2, and the scheduling of a loaded machine).
SESSION_MARGIN_S = 0.5

Rows = list[dict[str, Any]]
Records = dict[int, Rows]  # worker -> its history lines, in the order written


@dataclass
class Checked:
    """A history's verdict: how many operations, how many of unknown outcome (and why), the anomalies found."""

    operations: int = 0
    unknown: int = 0
    unknown_causes: Counter[str] = field(default_factory=Counter)
    anomalies: list[str] = field(default_factory=list)
    explanation: str = ""

    def add(self, anomaly: str, explanation: str) -> None:
        self.anomalies.append(anomaly)
        self.explanation = "\n".join([self.explanation, explanation]).strip()


class Workload(Protocol):
    name: str

    def argv(self, worker: int, seed: int, hosts: list[str], out: Path) -> list[str]: ...

    def acked_write_s(self, rows: Rows) -> list[float]: ...

    def before_stop(self, cluster: HostedQuorum, probe: Host, root: Path, records: Records) -> str: ...

    def finish(self, cluster: HostedQuorum, probe: Host, root: Path) -> None: ...

    def check(self, records: Records, root: Path) -> Checked: ...


def worker_argv(module: str, worker: int, seed: int, hosts: list[str], out: Path) -> list[str]:
    """The arguments every worker module takes (tests/faults/register.py and its kin)."""
    return [
        sys.executable, "-m", module, "--worker", str(worker), "--seed", str(seed), "--hosts", ",".join(hosts),
        "--out", str(out), "--session-s", str(SESSION_S), "--op-timeout-s", str(OP_TIMEOUT_S),
    ]  # fmt: skip


def unknown_causes(records: Records) -> Counter[str]:
    """Why operations had an unknown outcome or failed, by exception name (the lines' `why`)."""
    return Counter(r["why"] for rows in records.values() for r in rows if "why" in r)
