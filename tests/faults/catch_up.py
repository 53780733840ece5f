"""Did a node catch up after a fault healed: has it applied what the leader had committed after the heal?

    python -m tests.faults.catch_up --addresses '{"1": "198.18.29.10:7000", ...}' --target 2 --deadline-s 1234.5

Run in the probe host (campaign.py): it asks every node's Status over one channel each, every POLL_S, takes
the commit index of the node that leads with a majority on its term, and then waits until the target's
applied index reaches it. It prints one JSON line, {"commit": C, "at_s": T}: T the machine's monotonic time
at the answer that showed it (shared by every namespace, as the workers' history times are), or null when
the deadline (a monotonic time) passed first. One process polling, not one process per poll: the figure
is the node's, not a Python start-up's.

A node whose log lost entries it had acknowledged (a torn tail) is the case the leader must repair (Raft
section 5.3: the leader walks its follower's next index back; quorum.raft's Progress.regressed); a node that
was cut off, paused or restarted catches up the ordinary way. Either way a node that never does is a
replica in name only, which the convergence of the clients' writes alone does not show (the majority
answers them without it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import grpc

from tests.faults.cluster import leader_of
from tests.faults.netns import Host
from tests.quorum_harness import REPO_ROOT, subprocess_env
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

POLL_S = 0.05
STATUS_TIMEOUT_S = 1.0
# The probe's own start-up (Python, gRPC) on a loaded machine, beyond the deadline it is given.
START_MARGIN_S = 30.0


async def _status(stub: pb_grpc.QuorumStub) -> dict[str, Any] | None:
    try:
        s = await stub.Status(pb.StatusRequest(), timeout=STATUS_TIMEOUT_S)
    except grpc.aio.AioRpcError:
        return None
    return {"role": s.role, "term": s.term, "commit": s.commit_index, "applied": s.applied_index}


async def wait_caught_up(addresses: dict[int, str], target: int, deadline_s: float) -> dict[str, Any]:
    channels = {n: grpc.aio.insecure_channel(a) for n, a in addresses.items()}
    stubs = {n: pb_grpc.QuorumStub(c) for n, c in channels.items()}
    commit: int | None = None
    try:
        while time.monotonic() < deadline_s:
            answers = await asyncio.gather(*(_status(s) for s in stubs.values()))
            roles = dict(zip(stubs, answers, strict=True))
            if commit is None:
                leader = leader_of(roles)
                commit = None if leader is None else roles[leader]["commit"]  # type: ignore[index]
            mine = roles[target]
            if commit is not None and mine is not None and mine["applied"] >= commit:
                return {"commit": commit, "at_s": time.monotonic()}
            await asyncio.sleep(POLL_S)
        return {"commit": commit, "at_s": None}
    finally:
        await asyncio.gather(*(c.close() for c in channels.values()))


def caught_up_at(probe: Host, addresses: dict[int, str], target: int, deadline_s: float) -> float | None:
    """From the probe host: the monotonic time node `target` had applied the leader's commit index (taken
    once it is asked), or None when `deadline_s` passed first."""
    argv = [sys.executable, "-m", "tests.faults.catch_up", "--addresses", json.dumps(addresses),
            "--target", str(target), "--deadline-s", repr(deadline_s)]  # fmt: skip
    timeout_s = max(deadline_s - time.monotonic(), 0) + START_MARGIN_S
    try:
        done = probe.run(argv, timeout_s, capture_output=True, text=True, cwd=REPO_ROOT, env=subprocess_env())
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"catch-up probe still running {timeout_s:.0f} s after it started") from exc
    if done.returncode != 0:
        raise RuntimeError(f"catch-up probe failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)["at_s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--addresses", required=True, help='JSON: {"node id": "host:port", ...}')
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--deadline-s", type=float, required=True, help="a time of the monotonic clock")
    args = parser.parse_args(argv)
    addresses = {int(n): a for n, a in json.loads(args.addresses).items()}
    if args.target not in addresses:
        parser.error(f"--target {args.target} is not one of the nodes {sorted(addresses)}")
    print(json.dumps(asyncio.run(wait_caught_up(addresses, args.target, args.deadline_s))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
