"""Membership benchmark: a new voter joining a loaded 3-node quorum, and writes/s while it does.

    python3 bench/membership_bench.py [--entries 100000] [--seconds 5] [--inflight 64]

Real `zkraft quorum start` processes (register state machine, default settings) on loopback:

* `fill`: `--entries` writes into the cluster first (distinct keys, 100-byte values), so that the new node
  has that much state to catch up with: a snapshot (the nodes snapshot every 20,000 entries by default),
  then the log after it.
* `before`: committed writes/s over a window with `--inflight` writers (bench/quorum_bench.py's
  measure_throughput), on the three nodes.
* `join`: a fourth node started with `--join`, then `zkraft quorum add` (as a learner, caught up, promoted)
  while the same writers run: `add_to_voter_s` is from the add request to the promotion committed;
  `during` is the writes/s of a window that starts with the add request.

Output is JSON lines; nothing is asserted (benchmarks print figures). Every node is SIGKILLed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.quorum_bench import measure_throughput  # noqa: E402
from quorum.register_client import QuorumClient  # noqa: E402
from tests.quorum_harness import QuorumProcesses, peers_text, wait_for_leader, wait_serving  # noqa: E402
from zkraft.tools import quorum_members  # noqa: E402

BOOTSTRAP = (1, 2, 3)
NEW_NODE = 4
TIMEOUT_S = 120.0
FILL_INFLIGHT = 256


class _Processes(QuorumProcesses):
    def command(self, node_id: int, **kw: object) -> list[str]:
        cmd = super().command(node_id, peers=peers_text({i: self.addresses[i] for i in BOOTSTRAP}))
        if node_id not in BOOTSTRAP:
            at = cmd.index("--peers")
            cmd[at : at + 2] = ["--join", self.addresses[1]]
        return cmd


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


async def fill(client: QuorumClient, entries: int, payload: bytes) -> dict[str, Any]:
    started = time.perf_counter()
    queue = iter(range(entries))

    async def worker() -> None:
        for i in queue:
            await client.set(b"fill/%d" % i, payload)

    await asyncio.gather(*(worker() for _ in range(FILL_INFLIGHT)))
    elapsed = time.perf_counter() - started
    return {
        "measure": "fill",
        "entries": entries,
        "seconds": round(elapsed, 1),
        "writes_per_s": round(entries / elapsed),
    }


async def bench(root: Path, args: argparse.Namespace) -> None:
    payload = b"x" * 100
    with _Processes(root, n=4) as procs:
        for i in BOOTSTRAP:
            procs.start(i)
        addresses = {i: procs.addresses[i] for i in BOOTSTRAP}
        await wait_for_leader(addresses, TIMEOUT_S)
        async with QuorumClient(list(addresses.values()), request_timeout_s=10.0) as client:
            emit(await fill(client, args.entries, payload))
            before = await measure_throughput(client, args.inflight, 3.0, args.seconds, "before", payload)
            emit({"measure": "before", **before})
            procs.start(NEW_NODE)
            await wait_serving(procs.addresses[NEW_NODE], TIMEOUT_S)
            servers = ",".join(addresses.values())
            started = time.perf_counter()
            add = asyncio.create_task(
                asyncio.to_thread(
                    quorum_members.add, servers, NEW_NODE, procs.addresses[NEW_NODE], out=StringIO(),
                    catch_up_timeout_s=TIMEOUT_S,
                )
            )  # fmt: skip
            during = await measure_throughput(client, args.inflight, 0.0, args.seconds, "during", payload)
            await asyncio.wait_for(add, TIMEOUT_S)
            add_s = time.perf_counter() - started
            emit({"measure": "during", **during})
            emit(
                {
                    "measure": "join",
                    "entries": args.entries,
                    "add_to_voter_s": round(add_s, 2),
                    "during_over_before": round(during["writes_per_s"] / max(before["writes_per_s"], 1e-9), 3),
                }
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, default=100_000, help="writes in the tree before the join (default 100000)")
    p.add_argument("--seconds", type=float, default=5.0, help="each throughput window (default 5)")
    p.add_argument("--inflight", type=int, default=64, help="writers with one write in flight each (default 64)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="membership-bench-") as root:
        asyncio.run(bench(Path(root), args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
