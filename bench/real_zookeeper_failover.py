"""Leader failover of a real 3-node Apache ZooKeeper, measured as bench/quorum_bench.py measures zkraft's.

`python3 bench/quorum_bench.py --failovers 10 --real-zookeeper` runs these rounds after zkraft's, on the
ensemble zk_bench runs (tests/real_zookeeper.py from pyspark's jars: tickTime 2000, full JIT, fsync on).
One kazoo client (its default reconnect policy, as a user runs it) keeps one sequential create in flight;
the leader (`srvr`'s Mode) is SIGKILLed; `failover_s` is the time from the kill to the first create
acknowledged with a zxid of a newer epoch. A zxid's high 32 bits are the epoch of the leader that
assigned it, so a create the old leader acknowledged just before it died is told apart (counted in
`acks_from_old_leader_after_kill`). The killed server is then restarted, and the next round waits until
all three serve again. Blocking (kazoo is threaded): quorum_bench runs it in a worker thread.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.figures import emit

SERVING_TIMEOUT_S = 120.0
FAILOVER_TIMEOUT_S = 60.0
SESSION_TIMEOUT_S = 10.0
STEADY_WRITES_BEFORE_KILL = 50
WRITER_JOIN_TIMEOUT_S = 30.0
POLL_S = 0.001
ERROR_PAUSE_S = 0.005  # after a failed create, as quorum_bench's writer does
EPOCH_SHIFT = 32
BASE_PATH = "/failover"


@dataclass(slots=True)
class _Writer:
    """One sequential create in flight until stopped; every acknowledgement (call ns, ack ns, czxid) and
    every error (ns, exception name)."""

    client: Any
    payload: bytes
    acks: list[tuple[int, int, int]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    stopped: bool = False

    def run(self) -> None:
        from kazoo.exceptions import KazooException  # type: ignore[import-untyped]

        while not self.stopped:
            t0 = time.perf_counter_ns()
            try:
                _path, stat = self.client.create(f"{BASE_PATH}/w-", self.payload, sequence=True, include_data=True)
            except KazooException as exc:
                self.errors.append((time.perf_counter_ns(), type(exc).__name__))
                time.sleep(ERROR_PAUSE_S)
                continue
            self.acks.append((t0, time.perf_counter_ns(), stat.czxid))


def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s")
        time.sleep(POLL_S)


def _round(ensemble: Any, writer: _Writer, rnd: int) -> dict[str, Any]:
    modes = ensemble.wait_serving(SERVING_TIMEOUT_S)
    leader = next(node_id for node_id, mode in modes.items() if mode == "leader")
    acks_before = len(writer.acks)
    _wait_for(
        lambda: len(writer.acks) >= acks_before + STEADY_WRITES_BEFORE_KILL,
        FAILOVER_TIMEOUT_S,
        "the writer made no steady progress before the kill",
    )
    old_epoch = writer.acks[-1][2] >> EPOCH_SHIFT
    n_acks, n_errors = len(writer.acks), len(writer.errors)
    kill_ns = time.perf_counter_ns()
    ensemble.kill(leader)
    dead_ns = time.perf_counter_ns()
    _wait_for(
        lambda: any(z >> EPOCH_SHIFT > old_epoch for _, _, z in writer.acks[n_acks:]),
        FAILOVER_TIMEOUT_S,
        "no create was acknowledged by a new leader",
    )
    t0, t1, zxid = next(a for a in writer.acks[n_acks:] if a[2] >> EPOCH_SHIFT > old_epoch)
    errors_during: dict[str, int] = {}
    for t, name in writer.errors[n_errors:]:
        if t <= t1:
            errors_during[name] = errors_during.get(name, 0) + 1
    record: dict[str, Any] = {
        "measure": "failover",
        "system": "zookeeper",
        "version": ensemble.version,
        "round": rnd,
        "killed": leader,
        "old_epoch": old_epoch,
        "new_epoch": zxid >> EPOCH_SHIFT,
        "failover_s": round((t1 - kill_ns) / 1e9, 4),
        "kill_reaped_s": round((dead_ns - kill_ns) / 1e9, 4),
        "acks_from_old_leader_after_kill": sum(
            1 for _, a, z in writer.acks[n_acks:] if a > kill_ns and z >> EPOCH_SHIFT == old_epoch
        ),
        "first_write_call_to_ack_s": round((t1 - t0) / 1e9, 4),
        "client_errors_before_first_write": errors_during,
    }
    ensemble.start(leader)
    ensemble.wait_serving(SERVING_TIMEOUT_S)
    return record


def failover_rounds(root: Path, rounds: int, payload: bytes) -> list[dict[str, Any]]:
    """`rounds` leader kills on a fresh ensemble under `root`; each round's record is emitted as it ends."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]

    from bench.zk_bench import bench_zookeeper

    results: list[dict[str, Any]] = []
    with bench_zookeeper(root) as ensemble:
        ensemble.start_all()
        ensemble.wait_serving(SERVING_TIMEOUT_S)
        client = KazooClient(hosts=ensemble.connect_string, timeout=SESSION_TIMEOUT_S)
        client.start(timeout=SERVING_TIMEOUT_S)
        try:
            client.ensure_path(BASE_PATH)
            writer = _Writer(client, payload)
            thread = threading.Thread(target=writer.run, name="zk-failover-writer", daemon=True)
            thread.start()
            try:
                for rnd in range(1, rounds + 1):
                    try:
                        record = _round(ensemble, writer, rnd)
                    except (TimeoutError, AssertionError) as exc:
                        record = {"measure": "failover", "system": "zookeeper", "round": rnd, "error": str(exc)}
                        for node_id in ensemble.addresses:  # bring the ensemble back whole for the next round
                            if not ensemble.alive(node_id):
                                ensemble.start(node_id)
                    emit(record)
                    results.append(record)
            finally:
                writer.stopped = True
                thread.join(WRITER_JOIN_TIMEOUT_S)
        finally:
            client.stop()
            client.close()
    return results
