"""An observer (`zkraft quorum add --observer`, ZooKeeper's peerType=observer) on real processes in ZooKeeper mode:
it serves a kazoo session, reads locally, forwards the session's writes to the leader, and never makes a
quorum (issue 32)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from tests.quorum_harness import FAST_ZK_PROPERTIES, wait_for_leader, wait_serving
from tests.test_quorum_membership_cluster import BOOTSTRAP, TIMEOUT_S, MemberProcesses, servers, zkraft

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

OBSERVER = 4
# Longer than an election and a forwarded write's own timeout: a write that could commit would have.
NO_QUORUM_WAIT_S = 8.0


def test_an_observer_serves_a_kazoo_session_and_never_makes_a_quorum(tmp_path_factory: pytest.TempPathFactory) -> None:
    with MemberProcesses(tmp_path_factory.mktemp("observer"), n=4, properties=FAST_ZK_PROPERTIES) as c:
        for i in BOOTSTRAP:
            c.start(i)
        leader, _ = asyncio.run(wait_for_leader({i: c.addresses[i] for i in BOOTSTRAP}, TIMEOUT_S))
        c.start(OBSERVER)
        asyncio.run(wait_serving(c.addresses[OBSERVER], TIMEOUT_S))
        done = zkraft(
            "add", "--server", servers(c, BOOTSTRAP), "--id", str(OBSERVER), "--address", c.addresses[OBSERVER],
            "--observer",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + c.log_tail(OBSERVER)
        zk = KazooClient(hosts=c.zk_address(OBSERVER), timeout=10.0)
        zk.start(timeout=TIMEOUT_S)
        try:
            zk.create("/through-the-observer", b"v")  # forwarded to the leader, answered once applied here
            assert zk.get("/through-the-observer")[0] == b"v"
            for voter in BOOTSTRAP:
                if voter != leader:
                    c.kill(voter)
            # The leader and the observer are two of four members but one of three voters: nothing commits
            # (the write's outcome stays unknown to the client, as with ZooKeeper: it may commit once a voter
            # is back, so the test does not look for it afterwards).
            pending = zk.create_async("/without-a-quorum", b"x")
            with pytest.raises(Exception) as refused:  # noqa: PT011 - a timeout or the server's error, both fine
                pending.get(timeout=NO_QUORUM_WAIT_S)
            assert refused.type is KazooTimeoutError or "NodeExists" not in refused.type.__name__
        finally:
            with contextlib.suppress(Exception):
                zk.stop()
                zk.close()
