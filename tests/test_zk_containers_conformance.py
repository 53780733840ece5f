"""Container and TTL znodes: one script against a real ZooKeeper and against zkraft, the outcomes compared.

The reference is Apache ZooKeeper 3.9 from pyspark's jars (tests/real_zookeeper.py), standalone, with
`zookeeper.extendedTypesEnabled=true` and its ContainerManager checking every 200 ms
(`-Dznode.container.checkIntervalMs`, a system property only), driven by kazoo with the createContainer
(19) and createTTL (21) requests kazoo 2.11 lacks. The subject is a 3-node zkraft quorum with the same
settings, driven by the SDK (`create(container=True)`, `create(ttl_ms=...)`) and by kazoo on its client
ports (the ZooKeeper wire protocol: the same createContainer and createTTL requests).

Each step records its return value or the ZooKeeper code name of its error, the created path and the
Stat fields that do not depend on the clock or the zxid (version, cversion, aversion, ephemeralOwner,
dataLength, numChildren), and whether czxid equals mzxid. The sweep steps wait (with a deadline) until
the server removed the node, and the watch set on it saw NodeDeleted.
"""

from __future__ import annotations

import asyncio
import threading
from collections import namedtuple
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_until
from tests.real_zookeeper import RealZooKeeper, unavailable_reason

pytest.importorskip("kazoo", reason="kazoo drives the real ZooKeeper: python3 -m pip install -e '.[test]'")
_UNAVAILABLE = unavailable_reason()
if _UNAVAILABLE is not None:
    pytest.skip(f"cannot start a real ZooKeeper: {_UNAVAILABLE}", allow_module_level=True)

from kazoo.client import KazooClient  # noqa: E402
from kazoo.protocol.serialization import Create2, long_struct  # noqa: E402
from kazoo.security import OPEN_ACL_UNSAFE  # noqa: E402

from client import ZkClient  # noqa: E402
from client.zk import codec  # noqa: E402
from client.zk.client import _SharedLoop  # noqa: E402
from client.zk.states import CreateMode  # noqa: E402
from client.zk.transaction import CreateTxnOp  # noqa: E402
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHECK_INTERVAL_MS = 200
START_TIMEOUT_S = 60.0
OP_TIMEOUT_S = 15.0
SWEEP_WAIT_S = 30.0
TTL_MS = 1000
PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL = 5, 6
ZKRAFT_PROPERTIES = {
    **FAST_ZK_PROPERTIES,
    "znode.container.checkIntervalMs": str(CHECK_INTERVAL_MS),
    "zookeeper.extendedTypesEnabled": "true",
}
CODE_NAMES = {-6: "UNIMPLEMENTED", -8: "BADARGUMENTS", -101: "NONODE", -108: "NOCHILDRENFOREPHEMERALS"}


class CreateContainer(Create2):
    """ZooDefs.OpCode.createContainer: a CreateRequest (mode CONTAINER); the reply is a Create2Response."""

    type = 19


class CreateTtl(namedtuple("CreateTtl", "path data acl flags ttl")):
    """ZooDefs.OpCode.createTTL: CreateTTLRequest = CreateRequest + long ttl; the reply is a Create2Response."""

    type = 21

    def serialize(self) -> bytearray:
        body = Create2(self.path, self.data, self.acl, self.flags).serialize()
        body.extend(long_struct.pack(self.ttl))
        return body

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> Any:
        return Create2.deserialize(buffer, offset)


class ZooKeeperWithSweep(RealZooKeeper):
    """The real server with the container settings that exist only as system properties."""

    def command(self, node_id: int) -> list[str]:
        command = super().command(node_id)
        at = command.index("-cp")
        return [*command[:at], f"-Dznode.container.checkIntervalMs={CHECK_INTERVAL_MS}", *command[at:]]


class Driver:
    """What the script needs: create of every kind (path, stat), delete, exists with a watch."""

    client: Any

    def create(self, path: str, mode: int = 0, ttl_ms: int = 0, data: bytes = b"") -> tuple[str, Any]:
        raise NotImplementedError

    def create_flags(self, path: str, flags: int) -> tuple[str, Any]:
        """create2 (15) with these CreateMode flags, as a client would send them (kazoo's Create2)."""
        raise NotImplementedError

    def delete(self, path: str) -> None:
        raise NotImplementedError

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class KazooDriver(Driver):
    def __init__(self, hosts: str) -> None:
        self.client = KazooClient(hosts=hosts, timeout=OP_TIMEOUT_S)
        self.client.start(timeout=START_TIMEOUT_S)

    def _request(self, request: Any) -> Any:
        result = self.client.handler.async_result()
        self.client._call(request, result)
        return result.get(timeout=OP_TIMEOUT_S)

    def create(self, path: str, mode: int = 0, ttl_ms: int = 0, data: bytes = b"") -> tuple[str, Any]:
        if mode == 4:
            return self._request(CreateContainer(path, data, OPEN_ACL_UNSAFE, mode))
        if mode in (PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL):
            return self._request(CreateTtl(path, data, OPEN_ACL_UNSAFE, mode, ttl_ms))
        return self.client.create(path, data, ephemeral=bool(mode & 1), sequence=bool(mode & 2), include_data=True)

    def create_flags(self, path: str, flags: int) -> tuple[str, Any]:
        return self._request(Create2(path, b"", OPEN_ACL_UNSAFE, flags))

    def delete(self, path: str) -> None:
        self.client.delete(path)

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        return self.client.exists(path, watch=watch)

    def close(self) -> None:
        self.client.stop()
        self.client.close()


class SdkDriver(Driver):
    def __init__(self, hosts: str) -> None:
        self.client = ZkClient(hosts, timeout=START_TIMEOUT_S, randomize_hosts=False)
        self.client.start()

    def create(self, path: str, mode: int = 0, ttl_ms: int = 0, data: bytes = b"") -> tuple[str, Any]:
        if mode in (PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL) and ttl_ms == 0:
            # The SDK reads ttl_ms=0 as "no TTL": a TTL mode without one goes as the SDK sends a create.
            request = codec.create_request(CreateTxnOp(path, data, CreateMode(mode), ttl_ms=0))
            reply = self.client._run(self.client._aio._call(request, None))
            return codec.reply_path(reply), codec.reply_stat(reply)
        created: tuple[str, Any] = self.client.create(
            path,
            data,
            ephemeral=bool(mode & 1) and mode < 4,
            sequence=mode in (2, 3, PERSISTENT_SEQUENTIAL_WITH_TTL),
            container=mode == 4,
            ttl_ms=ttl_ms if mode in (PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL) else 0,
            include_data=True,
        )
        return created

    def create_flags(self, path: str, flags: int) -> tuple[str, Any]:
        """The SDK has no such request; a persistent create is what ZooKeeper makes of it."""
        return self.create(path)

    def delete(self, path: str) -> None:
        self.client.delete(path)

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Any:
        return self.client.exists(path, watch=watch)

    def close(self) -> None:
        self.client.close()


def stat_view(stat: Any, session_id: int) -> tuple[Any, ...] | None:
    if stat is None:
        return None
    owner = "the session" if stat.ephemeralOwner == session_id else stat.ephemeralOwner
    return (
        f"version={stat.version}",
        f"cversion={stat.cversion}",
        f"aversion={stat.aversion}",
        f"ephemeralOwner={owner}",
        f"dataLength={stat.dataLength}",
        f"numChildren={stat.numChildren}",
        "czxid==mzxid" if stat.czxid == stat.mzxid else "czxid!=mzxid",
    )


def run_script(d: Driver, root: str) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    session_id = int(d.client.client_id[0])
    deleted: list[str] = []
    lock = threading.Lock()

    def on_event(event: Any) -> None:
        with lock:
            deleted.append(f"{getattr(event.type, 'name', event.type)} {event.path[len(root) :]}")

    def step(label: str, call: Callable[[], Any]) -> Any:
        try:
            value = call()
        except Exception as exc:  # an error is a result to compare
            code = getattr(exc, "code", None)
            rows.append((label, CODE_NAMES.get(code, str(code)) if isinstance(code, int) else type(exc).__name__))
            return None
        if isinstance(value, tuple) and len(value) == 2:
            rows.append((label, (value[0][len(root) :], stat_view(value[1], session_id))))
        else:
            rows.append((label, stat_view(value, session_id) if hasattr(value, "czxid") else value))
        return value

    def swept(path: str) -> None:
        wait_until(lambda: d.exists(path) is None, SWEEP_WAIT_S, message=f"{path} swept")
        rows.append((f"swept {path[len(root) :]}", True))

    d.create(root)
    step("create container /c", lambda: d.create(f"{root}/c", mode=4, data=b"box"))
    step("create /c/x", lambda: d.create(f"{root}/c/x"))
    step("create ephemeral /c/e", lambda: d.create(f"{root}/c/e", mode=1))
    step("create ttl /t", lambda: d.create(f"{root}/t", mode=PERSISTENT_WITH_TTL, ttl_ms=TTL_MS))
    step("create ttl /t/child", lambda: d.create(f"{root}/t/child"))
    # Created after /t with the same TTL: once it is swept, /t is past its TTL too and a sweep saw it.
    step("create ttl /m", lambda: d.create(f"{root}/m", mode=PERSISTENT_WITH_TTL, ttl_ms=TTL_MS))
    seq = step(
        "create sequential ttl /s-", lambda: d.create(f"{root}/s-", mode=PERSISTENT_SEQUENTIAL_WITH_TTL, ttl_ms=1)
    )
    step("create ttl 0", lambda: d.create(f"{root}/bad", mode=PERSISTENT_WITH_TTL, ttl_ms=0))
    step("create ttl 2^40", lambda: d.create(f"{root}/bad", mode=PERSISTENT_WITH_TTL, ttl_ms=1 << 40))
    step("create under a missing container", lambda: d.create(f"{root}/gone/x"))
    step("create container /idle", lambda: d.create(f"{root}/idle", mode=4))
    step("create2 with the container flag /f4", lambda: d.create_flags(f"{root}/f4", 4))
    step("create /f4/x", lambda: d.create(f"{root}/f4/x"))
    step("delete /f4/x", lambda: d.delete(f"{root}/f4/x"))
    step("exists /c watch", lambda: d.exists(f"{root}/c", watch=on_event))
    step("delete /c/x", lambda: d.delete(f"{root}/c/x"))
    step("exists /c", lambda: d.exists(f"{root}/c"))
    step("delete /c/e", lambda: d.delete(f"{root}/c/e"))
    swept(f"{root}/c")
    wait_until(lambda: deleted, OP_TIMEOUT_S, message="the watch on the container fired")
    rows.append(("watch events", list(deleted)))
    swept(seq[0])
    swept(f"{root}/m")
    step("exists /t (has a child)", lambda: d.exists(f"{root}/t"))
    step("delete /t/child", lambda: d.delete(f"{root}/t/child"))
    swept(f"{root}/t")
    step("exists /idle (never used)", lambda: d.exists(f"{root}/idle"))
    step("exists /f4 (a persistent node: create2 ignores the container flag)", lambda: d.exists(f"{root}/f4"))
    return rows


def _on_client_loop(coro: Any, timeout_s: float) -> Any:
    loop, _ = _SharedLoop.get()
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout_s)


@pytest.fixture(scope="module")
def zookeeper_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("zookeeper")
    with ZooKeeperWithSweep(root, properties={"extendedTypesEnabled": "true"}) as server:
        server.start_all()
        server.wait_serving(START_TIMEOUT_S)
        yield server.connect_string


@pytest.fixture(scope="module")
def zkraft_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    with QuorumProcesses(tmp_path_factory.mktemp("zkraft"), n=3, properties=ZKRAFT_PROPERTIES) as cluster:
        cluster.start_all()
        _on_client_loop(wait_for_leader(cluster.addresses, timeout_s=START_TIMEOUT_S), START_TIMEOUT_S + 5)
        yield cluster


@pytest.fixture(scope="module")
def expected(zookeeper_hosts: str) -> list[tuple[str, Any]]:
    driver = KazooDriver(zookeeper_hosts)
    try:
        return run_script(driver, "/containers")
    finally:
        driver.close()


def test_the_sdk_on_zkraft_matches_kazoo_on_zookeeper(
    expected: list[tuple[str, Any]], zkraft_cluster: QuorumProcesses
) -> None:
    driver = SdkDriver(",".join(zkraft_cluster.addresses[n] for n in sorted(zkraft_cluster.addresses)))
    try:
        actual = run_script(driver, "/containers")
    finally:
        driver.close()
    assert actual == expected


def test_kazoo_on_zkraft_client_ports_matches_kazoo_on_zookeeper(
    expected: list[tuple[str, Any]], zkraft_cluster: QuorumProcesses
) -> None:
    driver = KazooDriver(zkraft_cluster.zk_connect_string)
    try:
        actual = run_script(driver, "/containers-over-the-wire")
    finally:
        driver.close()
    assert actual == expected
