"""The lock and election workloads: one holder process per client host, run until its stdin closes.

    python -m tests.faults.locks --recipe lock --hosts 198.18.29.10:2181,... --worker 1 --seed 7 --out w1.jsonl
    python -m tests.faults.locks --dump --recipe lock --hosts ... --out acts-lock.jsonl   # read back the acts
    python -m tests.faults.locks --dump --lock-nodes-only --recipe lock --hosts ... --out nodes.jsonl  # who holds

Each worker contends, over ZooKeeper's wire protocol through kazoo, for one lock made of ephemeral sequential
znodes (ZooKeeper's recipe, "Locks" in its recipes page): `--recipe lock` is kazoo's Lock, `--recipe election`
kazoo's Election (the same znodes, the leader being the lock's holder while its function runs). A worker that
holds it logs `acquire` with what it saw: its lock node and that node's czxid, its session, and the parent's
pzxid from the read that told it its node is the lowest (`zxid`: every earlier holder's node was deleted
at or before it; locks_check.py orders tenures by it). Then it *acts* a few
times: each act creates a persistent sequential znode under the acts path, naming the holder; the create's
czxid orders the act among every other change. Then it deletes its lock node (`release`).

The rule a holder keeps (the "unsafe locks" lesson of Jepsen's etcd analysis: a lock is only as good as its
holder's proof that it still holds it): it acts only while its session is provably alive -- the client is
CONNECTED and no SUSPENDED or LOST came since it acquired (Curator's standard policy: SUSPENDED counts as lost).
A holder that saw either stops acting at once, logs `stop_acting`, and contends again from scratch. Its
state listener logs `suspended` and `lost` (a LOST is a session expiry the client learned).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import CancelledError, NoNodeError
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock

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

RECIPES = ("lock", "election")
# The Curator worker (tests/curator/CuratorLockWorker.java) writes its acts under /curator-acts: --dump reads them.
DUMPED = (*RECIPES, "curator")
ACTS_MAX = 4
ACQUIRE_TIMEOUT_S = 5.0
TENURES_MAX = 100_000
# The lowest-sequence node holds the lock; kazoo names them <uuid>__lock__<10-digit sequence>.
SEQUENCE_DIGITS = 10


def lock_path(recipe: str) -> str:
    return f"/{recipe}"


def acts_path(recipe: str) -> str:
    return f"/{recipe}-acts"


def sequence(node: str) -> str:
    return node[-SEQUENCE_DIGITS:]


class Holder:
    """One contender: acquire, check, act, release, again; every step one JSON line."""

    def __init__(self, zk: KazooClient, args: argparse.Namespace, out: IO[str], stop: threading.Event) -> None:
        self.zk, self.args, self.out, self.stop = zk, args, out, stop
        self.rng = random.Random(args.seed * 1000 + args.worker)
        self.process = args.worker * PROCESS_STRIDE
        self.lost = threading.Event()  # SUSPENDED or LOST since the current tenure began
        self.recipe: Lock | Election | None = None  # what a stop cancels
        self._write = threading.Lock()  # the listener writes from kazoo's thread
        self.stale: list[tuple[int, str]] = []  # (session, path) of lock nodes whose delete failed
        self.last_session = "-"
        self.tenure_session = 0  # the session the current tenure's lock node belongs to
        zk.add_listener(self.on_state)

    def session(self) -> str:
        """The client's session; while it has none (after LOST), the last one it had."""
        current = self.zk.client_id  # once: None from the moment the client disconnects
        if current:
            self.last_session = f"{current[0]:#x}"
        return self.last_session

    def record(self, kind: str, invoke_s: float, complete_s: float | None, **fields: Any) -> None:
        line = {"p": self.process, "k": kind, "i": invoke_s, "c": complete_s, "session": self.session(), **fields}
        with self._write:
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()

    def on_state(self, state: str) -> None:
        """kazoo's connection thread: only a flag and a line (kazoo forbids blocking calls here)."""
        now = time.monotonic()
        if state == KazooState.SUSPENDED:
            self.lost.set()
            self.record("suspended", now, now)
        elif state == KazooState.LOST:
            self.lost.set()
            self.record("lost", now, None, why="SessionExpiredError", f=now)

    def call(self, async_result: Any) -> Any:
        return async_result.get(timeout=self.args.op_timeout_s)

    def may_act(self) -> bool:
        return not self.stop.is_set() and not self.lost.is_set() and self.zk.state == KazooState.CONNECTED

    def hold(self, node: str, invoke_s: float) -> None:
        """The holder's confirming read, then its acts while it may act."""
        parent, path = lock_path(self.args.recipe), f"{lock_path(self.args.recipe)}/{node}"
        try:
            children, parent_stat = self.call(self.zk.get_children_async(parent, include_data=True))
            stat = self.call(self.zk.exists_async(path))
        except FAILURES as exc:
            self.record("stop_acting", invoke_s, time.monotonic(), holder=node, why=type(exc).__name__)
            return
        lowest = stat is not None and min(children, key=sequence) == node
        self.record(
            "acquire", invoke_s, time.monotonic(), holder=node, zxid=parent_stat.pzxid, lowest=lowest,
            czxid=stat.czxid if stat else None, owner=f"{stat.ephemeralOwner:#x}" if stat else None,
        )  # fmt: skip
        if not lowest:
            return  # its node is gone (the session expired meanwhile) or another is lower: it does not hold
        for _ in range(self.rng.randint(1, ACTS_MAX)):
            decided_s = time.monotonic()  # an act's invoke time is when the holder decided it may act
            if not self.may_act():
                self.record("stop_acting", decided_s, time.monotonic(), holder=node, why=self.why_not())
                return
            if not self.act(node, decided_s):
                return
            self.stop.wait(self.rng.uniform(0, self.args.pacing_max_s))

    def why_not(self) -> str:
        return "stop" if self.stop.is_set() else "lost" if self.lost.is_set() else str(self.zk.state)

    def act(self, node: str, invoke_s: float) -> bool:
        data = json.dumps({"holder": node, "w": self.args.worker, "session": self.session()}).encode()
        try:
            created, stat = self.call(
                self.zk.create_async(f"{acts_path(self.args.recipe)}/act-", data, sequence=True, include_data=True)
            )
        except FAILURES as exc:
            self.record("act", invoke_s, None, holder=node, why=type(exc).__name__, f=time.monotonic())
            self.process += 1
            return False
        self.record("act", invoke_s, time.monotonic(), holder=node, zxid=stat.czxid, path=created, ok=True)
        return True

    def release(self, node: str) -> None:
        """Delete the lock node; one that could not be deleted is retried before the next tenure."""
        invoke_s, session = time.monotonic(), self.tenure_session
        path = f"{lock_path(self.args.recipe)}/{node}"
        try:
            self.call(self.zk.delete_async(path))
        except NoNodeError:
            self.record("release", invoke_s, time.monotonic(), holder=node, gone=True)
            return
        except FAILURES as exc:
            self.record("release", invoke_s, None, holder=node, why=type(exc).__name__, f=time.monotonic())
            self.stale.append((session, path))
            return
        self.record("release", invoke_s, time.monotonic(), holder=node)

    def clear_stale(self) -> None:
        """A lock node of a live session blocks every contender: delete it (an expired session's is gone).
        The session is the tenure's, not the client's at the failure: kazoo has no client_id while
        disconnected, and a node left then must still go once the same session is back."""
        for session, path in list(self.stale):
            current = self.zk.client_id
            if current is None:
                return  # disconnected again: next time
            if current[0] != session:
                self.stale.remove((session, path))  # that session expired, and its nodes with it
                continue
            try:
                self.call(self.zk.delete_async(path))
            except NoNodeError:
                pass
            except FAILURES:
                return
            self.stale.remove((session, path))

    def wait_connected(self) -> bool:
        """Until the client is CONNECTED (False: told to stop first)."""
        while self.zk.state != KazooState.CONNECTED:
            if self.stop.wait(0.05):
                return False
        return True

    def tenure(self) -> None:
        if not self.wait_connected():
            return
        self.clear_stale()
        current = self.zk.client_id
        if current is None:
            return  # disconnected again since: the next tenure waits
        self.tenure_session = current[0]
        self.lost.clear()  # from here a SUSPENDED or LOST ends this tenure's right to act
        invoke_s = time.monotonic()
        if self.args.recipe == "lock":
            self.lock_tenure(invoke_s)
        else:
            self.election_tenure(invoke_s)

    def lock_tenure(self, invoke_s: float) -> None:
        lock = self.zk.Lock(lock_path("lock"), identifier=f"w{self.args.worker}")
        self.recipe = lock
        try:
            got = lock.acquire(timeout=ACQUIRE_TIMEOUT_S)
        except (*FAILURES, CancelledError) as exc:
            self.record("acquire_failed", invoke_s, time.monotonic(), why=type(exc).__name__)
            self.forget(lock)
            return
        finally:
            self.recipe = None
        if not got:
            self.record("acquire_failed", invoke_s, time.monotonic(), why="timeout")
            self.forget(lock)
            return
        assert lock.node is not None
        self.hold(lock.node, invoke_s)
        self.release(lock.node)

    def forget(self, lock: Lock) -> None:
        """kazoo's cleanup after a failed acquire is best effort: a node it left is deleted later."""
        if lock.node is not None:
            self.stale.append((self.tenure_session, f"{lock_path('lock')}/{lock.node}"))

    def election_tenure(self, invoke_s: float) -> None:
        election = self.zk.Election(lock_path("election"), f"w{self.args.worker}")
        self.recipe = election
        led: list[str] = []

        def lead() -> None:
            self.recipe = None  # elected: a stop ends the acts, not the recipe
            node = election.lock.node
            led.append(node)
            self.hold(node, invoke_s)

        try:
            election.run(lead)  # the recipe deletes the leader's node when `lead` returns
        except (*FAILURES, CancelledError) as exc:
            kind = "release" if led else "acquire_failed"
            fields = {"holder": led[0]} if led else {}
            self.record(kind, invoke_s, None if led else time.monotonic(), why=type(exc).__name__, **fields)
            if led:
                self.stale.append((self.tenure_session, f"{lock_path('election')}/{led[0]}"))
            return
        finally:
            self.recipe = None
        if led:
            self.record("release", time.monotonic(), time.monotonic(), holder=led[0])

    def cancel(self) -> None:
        recipe = self.recipe
        if recipe is not None:
            recipe.cancel()

    def run(self) -> None:
        deadline = time.monotonic() + self.args.duration_max_s
        for _ in range(TENURES_MAX):
            if self.stop.is_set() or time.monotonic() >= deadline:
                return
            self.tenure()
            self.stop.wait(self.rng.uniform(0, self.args.pacing_max_s))


def lock_nodes(zk: KazooClient, recipe: str) -> list[dict[str, Any]]:
    """The lock's znodes as they are now, lowest sequence first: each with its czxid and its owner session
    (ephemeralOwner), so that a lock nobody gets shows which session holds it."""
    parent = lock_path(recipe)
    if not zk.exists(parent):
        return []
    zk.sync(parent)
    rows = []
    for child in sorted(zk.get_children(parent), key=sequence):
        stat = zk.exists(f"{parent}/{child}")
        if stat is not None:  # deleted between the listing and the read
            rows.append({"node": child, "czxid": stat.czxid, "owner": f"{stat.ephemeralOwner:#x}"})
    return rows


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)


def dump(args: argparse.Namespace) -> int:
    """After a sync: every act znode (its czxid and what the holder wrote in it) into --out, and the lock
    nodes left beside it; with --lock-nodes-only, the lock nodes alone into --out (read while the workers
    still run, the evidence of a stuck lock: which session holds which node)."""
    zk = KazooClient(hosts=args.hosts, timeout=args.session_s)
    zk.start(timeout=CONNECT_TIMEOUT_S)
    if args.lock_nodes_only:
        write_jsonl(args.out, with_retries(lambda: lock_nodes(zk, args.recipe), READ_BACK_ATTEMPTS))
        zk.stop()
        return 0
    write_jsonl(args.out, with_retries(lambda: acts_now(zk, args.recipe), READ_BACK_ATTEMPTS))
    # Left after the workers closed their sessions: none, unless a session outlived its client.
    left = with_retries(lambda: lock_nodes(zk, args.recipe), READ_BACK_ATTEMPTS)
    write_jsonl(Path(args.out).with_name(f"lock-nodes-{args.recipe}-after-stop.jsonl"), left)
    zk.stop()
    return 0


def acts_now(zk: KazooClient, recipe: str) -> list[dict[str, Any]]:
    """Every act znode, after a sync: its name, czxid and what the holder wrote in it."""
    path = acts_path(recipe)
    zk.ensure_path(path)
    zk.sync(path)
    acts = []
    for child in sorted(zk.get_children(path)):
        data, stat = zk.get(f"{path}/{child}")
        acts.append({"path": child, "zxid": stat.czxid, **json.loads(data)})
    return acts


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = worker_parser(
        __doc__.split("\n")[0], pacing_max_s=0.02, dump_help="write every act znode to --out and exit"
    )
    parser.add_argument("--recipe", choices=DUMPED, required=True)
    parser.add_argument("--lock-nodes-only", action="store_true", help="with --dump: only the lock nodes")
    args = parse_worker_args(parser, argv)
    if args.lock_nodes_only and not args.dump:
        parser.error("--lock-nodes-only goes with --dump")
    if not args.dump and args.recipe not in RECIPES:
        parser.error(f"--recipe {args.recipe} is read back only (--dump); its workers are Java")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)  # kazoo logs every lost connection; the history says enough
    if args.dump:
        return dump(args)
    zk = client(args.hosts, args.session_s)
    zk.start(timeout=CONNECT_TIMEOUT_S)
    with_retries(lambda: zk.ensure_path(acts_path(args.recipe)))
    with_retries(lambda: zk.ensure_path(lock_path(args.recipe)))
    stop = threading.Event()
    with open(args.out, "a", encoding="utf-8") as out:
        holder = Holder(zk, args, out, stop)
        stop_on_stdin_eof(stop, then=holder.cancel)
        print("ready", flush=True)
        holder.run()
    stop_client(zk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
