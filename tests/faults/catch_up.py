"""Did a node catch up after a fault healed: has it applied what the leader had committed after the heal?

    python -m tests.faults.catch_up --addresses '{"1": "198.18.29.10:7000", ...}' --target 2
    (then, on stdin, once the fault healed: the deadline, a time of the monotonic clock)

Started in the probe host while the fault holds (campaign.py), so that its own start-up (Python, gRPC: seconds
on a loaded machine) is over by the heal. Told the heal, it asks every node's Status over one channel each,
every POLL_S, takes the commit index of the node that leads with a majority on its term, and waits until the
target's applied index reaches it. It prints one JSON line, {"commit": C, "at_s": T}: T the monotonic time of
the answer that showed it (the clock every namespace shares, as the workers' history times do), or null when
the deadline passed first.

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
# Beyond its deadline: the probe's last Status calls and its exit, on a loaded machine.
EXIT_MARGIN_S = 30.0


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


class Watcher:
    """The probe process for one fault: started while the fault holds, told the heal, asked the answer."""

    def __init__(self, probe: Host, addresses: dict[int, str], target: int) -> None:
        argv = [sys.executable, "-m", "tests.faults.catch_up", "--addresses", json.dumps(addresses),
                "--target", str(target)]  # fmt: skip
        self.proc = probe.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=REPO_ROOT, env=subprocess_env())  # fmt: skip
        self.deadline_s = 0.0

    def healed(self, deadline_s: float) -> None:
        """The fault healed: from now until `deadline_s` (monotonic) the probe waits for the target."""
        assert self.proc.stdin is not None
        self.deadline_s = deadline_s
        try:
            self.proc.stdin.write(f"{deadline_s!r}\n")
            self.proc.stdin.flush()  # communicate() closes it
        except BrokenPipeError:
            pass  # it died: caught_up_at says why

    def caught_up_at(self) -> float | None:
        """The monotonic time the target had caught up, None at the deadline; a failed probe raises."""
        timeout_s = max(self.deadline_s - time.monotonic(), 0) + EXIT_MARGIN_S
        try:
            out, err = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise RuntimeError(f"catch-up probe still running {timeout_s:.0f} s past its wait") from exc
        if self.proc.returncode != 0:
            raise RuntimeError(f"catch-up probe failed: {err.strip()[-500:]}")
        return json.loads(out)["at_s"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--addresses", required=True, help='JSON: {"node id": "host:port", ...}')
    parser.add_argument("--target", type=int, required=True)
    args = parser.parse_args(argv)
    addresses = {int(n): a for n, a in json.loads(args.addresses).items()}
    if args.target not in addresses:
        parser.error(f"--target {args.target} is not one of the nodes {sorted(addresses)}")
    told = sys.stdin.readline().strip()  # the deadline, once the fault healed
    try:
        deadline_s = float(told)
    except ValueError:
        print(f"catch_up: expected a deadline on stdin, got {told!r}", file=sys.stderr)
        return 2
    print(json.dumps(asyncio.run(wait_caught_up(addresses, args.target, deadline_s))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
