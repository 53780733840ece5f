"""Which CPUs a node's event-loop thread runs on, when the nodes of a cluster share one machine.

`zkraft up`, like the tests and benchmarks, runs every node of a cluster on
one machine. Each write crosses the leader's event loop and a follower's, and
each wakes the other through a socket. Linux places a woken thread near the
thread that woke it ("wake-affine"), so the two loops often end up taking
turns on one CPU while another idles, and a thread moved between CPUs leaves
its warm caches behind. Measured on this project's 2-core machine (a 3-node
cluster, sequential creates of 100 bytes, 4 alternating rounds of 200 each,
medians): from a client of the leader 2.87 ms with the scheduler free,
2.02 ms with the leader's loop on one CPU and the followers' on the other,
3.47 ms with the leader's and its voting follower's on the same CPU; from a
client of a follower 3.47, 2.51 and 4.16 ms.

So with placement on, the leader's loop thread runs on one of the CPUs the
process may use and every follower's loop thread on the others; a node moves
its own loop thread when its role changes. Only that thread: gRPC's threads
and the write-ahead-log writer run anywhere, so a loaded leader still uses
more than one CPU (pinning whole processes instead cost up to a quarter of
the create and setData throughput). The leader's CPU is picked from the
cluster id, so that two local clusters are unlikely to pile their leaders
onto the same CPU.

`auto` turns placement on only when every voter's address is a loopback
one, so that the nodes share this machine, and the process may use at least
two CPUs; `off` (a node's default: on a machine of its own a node has nothing
to share) leaves the scheduler free. `zkraft up` and the benchmarks ask for
`auto`. Only the first node of a
process is placed at a time: nodes sharing one loop thread cannot each have
their own. A stopped node gives its loop thread all the CPUs back (`release`).
"""

from __future__ import annotations

import ipaddress
import os
import threading
import zlib
from collections.abc import Collection, Iterable
from pathlib import Path

PLACEMENTS = ("auto", "off")
_TASKS_DIR = Path("/proc/self/task")
_placed_nodes = 0  # nodes of this process given a placement (for_node)


def shares_machine(hosts: Iterable[str]) -> bool:
    """Whether every host is a loopback one (localhost, 127.0.0.0/8, ::1): the nodes run on this machine."""
    for host in hosts:
        if host.lower() == "localhost":
            continue
        try:
            if not ipaddress.ip_address(host.strip("[]")).is_loopback:
                return False
        except ValueError:
            return False  # a name other than localhost: may be another machine
    return True


def loop_cpus(allowed: Collection[int], cluster_id: str, leader: bool) -> frozenset[int] | None:
    """The CPUs for a node's loop thread: the leader's one CPU, or all the others; None with fewer than two."""
    cpus = sorted(allowed)
    if len(cpus) < 2:
        return None
    leader_cpu = cpus[zlib.crc32(cluster_id.encode()) % len(cpus)]
    return frozenset({leader_cpu}) if leader else frozenset(cpus) - {leader_cpu}


class LoopPlacement:
    """Moves the calling thread, the node's event loop, to its role's CPUs (`place`)."""

    def __init__(self, cluster_id: str, allowed: Collection[int]) -> None:
        self._cluster_id = cluster_id
        self._allowed = frozenset(allowed)
        self._current: frozenset[int] | None = None

    @classmethod
    def for_node(cls, placement: str, cluster_id: str, hosts: Iterable[str]) -> LoopPlacement | None:
        """A placement for this process when `placement` and the machine call for one, else None."""
        global _placed_nodes
        hosts = list(hosts)
        if placement == "off" or len(hosts) < 2 or not hasattr(os, "sched_setaffinity") or not shares_machine(hosts):
            return None
        allowed = os.sched_getaffinity(0)
        if len(allowed) < 2 or _placed_nodes:
            return None
        _placed_nodes += 1
        return cls(cluster_id, allowed)

    @property
    def current(self) -> frozenset[int] | None:
        return self._current

    def place(self, leader: bool) -> bool:
        """Run the calling thread on the CPUs of a leader or of a follower, every other thread anywhere;
        returns whether the calling thread moved.

        The other threads are freed each time because a thread inherits the
        CPUs of the thread that starts it, and the loop thread starts some."""
        cpus = loop_cpus(self._allowed, self._cluster_id, leader)
        if cpus is None or cpus == self._current:
            return False
        os.sched_setaffinity(0, cpus)  # 0: the calling thread
        self._current = cpus
        me = threading.get_native_id()
        for task in _thread_ids():
            if task != me:
                try:
                    os.sched_setaffinity(task, self._allowed)
                except OSError:
                    pass  # the thread ended meanwhile
        return True

    def release(self) -> None:
        """Give the calling thread every CPU back, and this process's placement to a later node."""
        global _placed_nodes
        if self._current is not None:
            os.sched_setaffinity(0, self._allowed)
            self._current = None
        _placed_nodes = 0


def _thread_ids() -> list[int]:
    try:
        return [int(p.name) for p in _TASKS_DIR.iterdir()]
    except OSError:
        return []
