"""The register workload: one client process, run inside a client host, until its stdin closes.

    python -m tests.faults.register --hosts 198.18.29.10:2181,... --worker 1 --seed 7 --out w1.jsonl

It speaks ZooKeeper's wire protocol through kazoo (what a ZooKeeper user runs) to the nodes in the order
given (its home node first), and does random operations on one znode, /register:
- read: `sync` then `get` (ZooKeeper makes a read linearizable only after a sync: research on §1.4);
- write: `set` with version -1;
- cas: `set` with the version this client last saw (BadVersion: a definite failure, no effect).
Each operation is one JSON line in --out, written when it ends: a write or cas that raised ConnectionLoss,
a timeout or SessionExpired has an unknown outcome (`"c": null`) and the client goes on as a new process
(as Jepsen does after an "info" operation); a read that failed had no effect and is left out.
The monotonic clock is the machine's, shared by every namespace: the orchestrator's times compare.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

REGISTER = "/register"
INITIAL_VALUE = b"init"
KINDS = ("read", "write", "cas")
KIND_WEIGHTS = (4, 3, 3)
CONNECT_TIMEOUT_S = 30.0
# What a call may raise when the cluster or the link fails (KazooTimeoutError: our per-call deadline).
T = TypeVar("T")
FAILURES = (KazooException, KazooTimeoutError, OSError)
STOP_TIMEOUT_S = 5.0
# A worker's setup (the znodes it needs) is tried this many times: a loaded machine may drop the first
# connection before any fault, and a worker that dies there fails the whole run.
SETUP_ATTEMPTS = 5
# kazoo's default reconnect back-off doubles without a useful bound (0.1 s, 0.2 s, ... minutes): after a
# partition of a few seconds a client could sleep 10-25 s before trying again, and the run measured kazoo's
# back-off instead of the cluster's recovery. ZooKeeper's own client waits at most about 1 s between
# attempts (ClientCnxn.startConnect); so do the workers.
RECONNECT_DELAY_MAX_S = 1.0
SETUP_PAUSE_S = 0.5
# The read-backs after a run (--dump) retry longer: an election then (a loaded machine's leader may miss its
# check-quorum deadline, long after the last heal) ends every client connection, and kazoo reconnects.
READ_BACK_ATTEMPTS = 40
# A worker's logical process ids: worker * PROCESS_STRIDE + how many unknown outcomes it had so far.
PROCESS_STRIDE = 100_000
OPS_MAX = 1_000_000


class Worker:
    def __init__(self, zk: KazooClient, args: argparse.Namespace, out: IO[str], stop: threading.Event) -> None:
        self.zk, self.args, self.out, self.stop = zk, args, out, stop
        self.rng = random.Random(args.seed * 1000 + args.worker)
        self.process = args.worker * PROCESS_STRIDE
        self.known_version = 0
        self.count = 0

    def record(self, kind: str, invoke_s: float, complete_s: float | None, **fields: Any) -> None:
        line = {"p": self.process, "k": kind, "i": invoke_s, "c": complete_s, **fields}
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def call(self, async_result: Any) -> Any:
        return async_result.get(timeout=self.args.op_timeout_s)

    def one(self, kind: str) -> None:
        self.count += 1
        invoke_s = time.monotonic()
        if kind == "read":
            try:
                self.call(self.zk.sync_async(REGISTER))
                data, stat = self.call(self.zk.get_async(REGISTER))
            except FAILURES:
                return  # a read that failed had no effect
            self.record(kind, invoke_s, time.monotonic(), v=data.decode(), ver=stat.version)
            self.known_version = stat.version
            return
        value = f"w{self.args.worker}-{self.count}"
        expected = self.known_version if kind == "cas" else None
        version = -1 if expected is None else expected
        try:
            stat = self.call(self.zk.set_async(REGISTER, value.encode(), version))
        except BadVersionError:
            self.record(kind, invoke_s, time.monotonic(), v=value, ev=expected, ok=False)
            return
        except FAILURES as exc:
            # "f": when the call gave up (for the evidence only: the outcome stays unknown forever)
            self.record(kind, invoke_s, None, v=value, ev=expected, why=type(exc).__name__, f=time.monotonic())
            self.process += 1
            return
        self.record(kind, invoke_s, time.monotonic(), v=value, ev=expected, ver=stat.version, ok=True)
        self.known_version = stat.version

    def run(self) -> None:
        deadline = time.monotonic() + self.args.duration_max_s
        for _ in range(OPS_MAX):
            if self.stop.is_set() or time.monotonic() >= deadline:
                return
            self.one(self.rng.choices(KINDS, weights=KIND_WEIGHTS)[0])
            self.stop.wait(self.rng.uniform(0, self.args.pacing_max_s))  # pacing only: keeps the history checkable


def client(hosts: str, session_s: float) -> KazooClient:
    """A kazoo client trying `hosts` in the order given, reconnecting at most RECONNECT_DELAY_MAX_S apart."""
    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_DELAY_MAX_S)
    return KazooClient(hosts=hosts, timeout=session_s, randomize_hosts=False, connection_retry=retry)


def with_retries(setup: Callable[[], T], attempts: int = SETUP_ATTEMPTS) -> T:
    """`setup` (idempotent: ensure_path, a create that tolerates NodeExists, a read) until it succeeds, bounded;
    its result."""
    for attempt in range(attempts):
        try:
            return setup()
        except FAILURES:
            if attempt == attempts - 1:
                raise
            time.sleep(SETUP_PAUSE_S)  # back-off between attempts, not a wait for a condition
    raise AssertionError("unreachable: the last attempt returns or raises")


def worker_parser(description: str, pacing_max_s: float, dump_help: str | None = None) -> argparse.ArgumentParser:
    """The flags every ZooKeeper worker of the campaign takes (campaign.py starts them); `dump_help`: the
    worker also reads the cluster back with --dump (then --worker is not needed)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--hosts", required=True, help="host:port,... in the order to try")
    parser.add_argument("--out", required=True)
    if dump_help is not None:
        parser.add_argument("--dump", action="store_true", help=dump_help)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--session-s", type=float, default=2.0)
    parser.add_argument("--op-timeout-s", type=float, default=3.0)
    parser.add_argument("--pacing-max-s", type=float, default=pacing_max_s)
    parser.add_argument("--duration-max-s", type=float, default=300.0)
    return parser


def parse_worker_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if not getattr(args, "dump", False) and args.worker < 1:
        parser.error(f"--worker must be >= 1, got {args.worker}")
    return args


def stop_on_stdin_eof(stop: threading.Event, then: Callable[[], None] | None = None) -> None:
    """The campaign stops a worker by closing its stdin: `stop` is set then (and `then` called)."""

    def wait_for_eof() -> None:
        sys.stdin.read()
        stop.set()
        if then is not None:
            then()

    threading.Thread(target=wait_for_eof, daemon=True).start()


def stop_client(zk: KazooClient) -> None:
    """Closes the session, waiting at most STOP_TIMEOUT_S (a client cut off may never hear back)."""
    stopper = threading.Thread(target=zk.stop, daemon=True)
    stopper.start()
    stopper.join(STOP_TIMEOUT_S)


def ensure_register(zk: KazooClient) -> None:
    try:
        zk.create(REGISTER, INITIAL_VALUE)
    except NodeExistsError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = parse_worker_args(worker_parser(__doc__.split("\n")[0], pacing_max_s=0.02), argv)
    logging.basicConfig(level=logging.CRITICAL)  # kazoo logs every lost connection; the history says enough
    zk = client(args.hosts, args.session_s)
    zk.start(timeout=CONNECT_TIMEOUT_S)
    with_retries(lambda: ensure_register(zk))
    stop = threading.Event()
    stop_on_stdin_eof(stop)
    print("ready", flush=True)
    with open(args.out, "a", encoding="utf-8") as out:
        Worker(zk, args, out, stop).run()
    stop_client(zk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
