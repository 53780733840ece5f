"""The ZooKeeper observer of a Kafka fault run: one process, inside a client host, until its stdin closes.

    python -m tests.faults.kafka_observer --hosts 198.18.29.10:2181,... --topic t --partitions 4 --out zk.jsonl

Every --interval-ms it reads, through kazoo over ZooKeeper's wire protocol, what the Kafka checkers and the
runner need: the registered brokers (/brokers/ids), the controller (/controller), its epoch
(/controller_epoch) and every partition's leader-and-ISR (/brokers/topics/<t>/partitions/<p>/state). A
line is written whenever what it read differs from the line before ({"t": monotonic seconds, "brokers":
[...], "controller": id|null, "controller_epoch": n|null, "states": {"p": {...}|null}}). A poll that
fails (the observer's link or the quorum is down) is skipped: the history holds what was seen.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

CONNECT_TIMEOUT_S = 30.0
SESSION_S = 4.0
POLLS_MAX = 1_000_000
STATE_FIELDS = ("leader", "leader_epoch", "isr", "controller_epoch")
FAILURES = (KazooException, KazooTimeoutError, OSError)


def _json_or_none(zk: KazooClient, path: str) -> Any:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return json.loads(data) if data else None


def snapshot(zk: KazooClient, topic: str, partitions: int) -> dict[str, Any]:
    """One reading of the znodes the checkers look at (raises what kazoo raises when it cannot read)."""
    try:
        brokers = sorted(int(b) for b in zk.get_children("/brokers/ids"))
    except NoNodeError:
        brokers = []
    controller = _json_or_none(zk, "/controller")
    epoch = _json_or_none(zk, "/controller_epoch")
    states = {}
    for p in range(partitions):
        state = _json_or_none(zk, f"/brokers/topics/{topic}/partitions/{p}/state")
        states[str(p)] = None if state is None else {k: state[k] for k in STATE_FIELDS}
    return {
        "brokers": brokers,
        "controller": None if controller is None else controller["brokerid"],
        "controller_epoch": epoch,
        "states": states,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", required=True, help="host:port,... of the quorum's ZooKeeper ports")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--interval-ms", type=int, default=100)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)  # kazoo logs every lost connection; the history says enough
    zk = KazooClient(hosts=args.hosts, timeout=SESSION_S)
    zk.start(timeout=CONNECT_TIMEOUT_S)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    last: dict[str, Any] | None = None
    with open(args.out, "a", encoding="utf-8") as out:
        for _ in range(POLLS_MAX):
            if stop.is_set():
                break
            try:
                seen = snapshot(zk, args.topic, args.partitions)
            except FAILURES:
                seen = None
            if seen is not None and seen != last:
                out.write(json.dumps({"t": time.monotonic(), **seen}) + "\n")
                out.flush()
                last = seen
            stop.wait(args.interval_ms / 1000)
    threading.Thread(target=zk.stop, daemon=True).start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
