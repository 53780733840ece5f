"""The sessions workload: clients heartbeating through faults with ephemerals; none outlives its session.

    python -m tests.faults.sessions_workload --hosts 198.18.29.10:2181,... --worker 1 --seed 7 --out w1.jsonl

Each worker keeps creating ephemeral znodes under /eph (its heartbeat: every create touches its session and
is an acknowledged write) and deletes its oldest ones, keeping a few. When its client learns that its session
expired (kazoo's LOST), it logs `expired` and, once connected on its new session, syncs and lists /eph: an
ephemeral of the expired session still there is an anomaly (ZooKeeper closes a session and deletes its
ephemerals in one transaction, so after a sync no reader may see them). After the run every node is read
the same way (sessions_check.py checks the other half: no session expired while its worker was served).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from tests.faults.cluster import HostedQuorum
from tests.faults.netns import Host
from tests.faults.register import (
    CONNECT_TIMEOUT_S,
    FAILURES,
    PROCESS_STRIDE,
    READ_BACK_ATTEMPTS,
    client,
    parse_worker_args,
    stop_client,
    stop_on_stdin_eof,
    with_retries,
    worker_parser,
)
from tests.faults.workload import Checked, Records
from tests.quorum_harness import REPO_ROOT, subprocess_env

EPHEMERALS = "/eph"
KEEP = 4  # each worker's live ephemerals
OPS_MAX = 1_000_000
DUMP_TIMEOUT_S = 60.0


class Heartbeater:
    def __init__(self, zk: KazooClient, args: argparse.Namespace, out: IO[str], stop: threading.Event) -> None:
        self.zk, self.args, self.out, self.stop = zk, args, out, stop
        self.rng = random.Random(args.seed * 1000 + args.worker)
        self.process = args.worker * PROCESS_STRIDE
        self.session = zk.client_id[0]
        self.expired: list[int] = []  # sessions learned expired, not yet checked
        self.live: deque[str] = deque()
        self.count = 0
        self._write = threading.Lock()
        zk.add_listener(self.on_state)

    def record(self, kind: str, invoke_s: float, complete_s: float | None, **fields: Any) -> None:
        line = {"p": self.process, "k": kind, "i": invoke_s, "c": complete_s, **fields}
        with self._write:
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()

    def on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            now = time.monotonic()
            self.expired.append(self.session)
            self.record("expired", now, None, session=f"{self.session:#x}", why="SessionExpiredError", f=now)

    def call(self, async_result: Any) -> Any:
        return async_result.get(timeout=self.args.op_timeout_s)

    def create(self) -> None:
        self.count += 1
        invoke_s = time.monotonic()
        path = f"{EPHEMERALS}/w{self.args.worker}-{self.count}"
        try:
            _, stat = self.call(self.zk.create_async(path, b"", ephemeral=True, include_data=True))
        except FAILURES as exc:
            self.record("create", invoke_s, None, path=path, why=type(exc).__name__, f=time.monotonic())
            self.process += 1
            return
        self.session = stat.ephemeralOwner
        self.record("create", invoke_s, time.monotonic(), path=path, owner=f"{stat.ephemeralOwner:#x}", ok=True)
        self.live.append(path)
        while len(self.live) > KEEP:
            try:
                self.call(self.zk.delete_async(self.live.popleft()))
            except (NoNodeError, *FAILURES):
                pass  # an expired session's are gone; a live one's is listed, not checked

    def check_expired(self) -> None:
        """After learning of an expiry, on the new session: sync, list, and look for the old session's."""
        current = self.zk.client_id  # once: None from the moment the client disconnects
        if not self.expired or current is None or current[0] in self.expired:
            return
        invoke_s = time.monotonic()
        try:
            owners = owners_now(self.zk, self.args.op_timeout_s)
        except FAILURES:
            return  # tried again next time
        for session in self.expired:
            left = sorted(p for p, owner in owners.items() if owner == session)
            self.record("after_expiry", invoke_s, time.monotonic(), session=f"{session:#x}", left=left)
        self.expired.clear()
        self.live.clear()

    def run(self) -> None:
        deadline = time.monotonic() + self.args.duration_max_s
        for _ in range(OPS_MAX):
            if self.stop.is_set() or time.monotonic() >= deadline:
                return
            self.check_expired()
            self.create()
            self.stop.wait(self.rng.uniform(0, self.args.pacing_max_s))


def owners_now(zk: KazooClient, timeout_s: float) -> dict[str, int]:
    """Every ephemeral under /eph and its owner session, read after a sync (a vanished child is skipped)."""
    zk.sync_async(EPHEMERALS).get(timeout=timeout_s)
    owners = {}
    for child in zk.get_children_async(EPHEMERALS).get(timeout=timeout_s):
        stat = zk.exists_async(f"{EPHEMERALS}/{child}").get(timeout=timeout_s)
        if stat is not None:
            owners[child] = stat.ephemeralOwner
    return owners


def dump(args: argparse.Namespace) -> int:
    """Each node's view of /eph after a sync, one JSON line per ephemeral: {node, path, owner}."""
    with open(args.out, "w", encoding="utf-8") as out:
        for host in args.hosts.split(","):
            zk = KazooClient(hosts=host, timeout=args.session_s)
            zk.start(timeout=CONNECT_TIMEOUT_S)
            owners = with_retries(lambda: owners_now(zk, args.op_timeout_s), READ_BACK_ATTEMPTS)  # noqa: B023
            for path, owner in sorted(owners.items()):
                out.write(json.dumps({"node": host, "path": path, "owner": f"{owner:#x}"}) + "\n")
            zk.stop()
    return 0


def ephemerals_file(root: Path) -> Path:
    return root / "ephemerals.jsonl"


def dump_ephemerals(cluster: HostedQuorum, probe: Host, root: Path) -> None:
    """Every node's ephemerals after the run, read from the probe host into ephemerals.jsonl."""
    hosts = ",".join(cluster.zk_address(n) for n in sorted(cluster.hosts))
    argv = [sys.executable, "-m", "tests.faults.sessions_workload", "--dump", "--hosts", hosts,
            "--out", str(ephemerals_file(root))]  # fmt: skip
    done = probe.run(argv, DUMP_TIMEOUT_S, capture_output=True, text=True, cwd=REPO_ROOT, env=subprocess_env())
    if done.returncode != 0:
        raise RuntimeError(f"reading the ephemerals back failed: {done.stderr.strip()[-500:]}")


def read_ephemerals(root: Path) -> list[dict[str, Any]]:
    path = ephemerals_file(root)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def check(records: Records, ephemerals: list[dict[str, Any]]) -> Checked:
    """`ephemeral_outlived_session`: an expired session's ephemeral seen after a sync, by its worker or later."""
    rows = [r for rs in records.values() for r in rs]
    creates = [r for r in rows if r["k"] == "create"]
    checked = Checked(operations=len(creates), unknown=sum(1 for r in creates if r["c"] is None))
    checked.unknown_causes.update(r["why"] for r in creates if "why" in r)
    found = [
        f"worker {r['p'] // PROCESS_STRIDE}: after session {r['session']} expired, {r['left']} still there"
        for r in rows
        if r["k"] == "after_expiry" and r["left"]
    ]
    expired = {r["session"] for r in rows if r["k"] == "expired"}
    found += [
        f"{e['node']} lists {e['path']} of session {e['owner']}, expired" for e in ephemerals if e["owner"] in expired
    ]
    if found:
        checked.add("ephemeral_outlived_session", "\n".join(found))
    return checked


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    dump_help = "write every node's ephemerals to --out and exit"
    return parse_worker_args(worker_parser(__doc__.split("\n")[0], pacing_max_s=0.05, dump_help=dump_help), argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)  # kazoo logs every lost connection; the history says enough
    if args.dump:
        return dump(args)
    zk = client(args.hosts, args.session_s)
    zk.start(timeout=CONNECT_TIMEOUT_S)
    with_retries(lambda: zk.ensure_path(EPHEMERALS))
    stop = threading.Event()
    stop_on_stdin_eof(stop)
    print("ready", flush=True)
    with open(args.out, "a", encoding="utf-8") as out:
        Heartbeater(zk, args, out, stop).run()
    stop_client(zk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
