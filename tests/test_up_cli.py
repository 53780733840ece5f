"""`zkraft up` and `zkraft quorum status` against real quorum node and broker processes on loopback ports."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from client import ZkClient
from tests.helpers import wait_until
from tests.real_zookeeper import four_letter_word
from zkraft import up as up_module

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("quorum.server") is None, reason="quorum/server.py not written yet"),
]

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 90.0  # above zkraft up's own broker and quorum stop timeouts together
STATUS_RUN_TIMEOUT_S = 30.0
ERROR_RUN_TIMEOUT_S = 60.0
ZK_TIMEOUT_S = 10.0
PORT_SEARCH_ATTEMPTS = 50
# Kafka listener ports a test's cluster may grow into on a rerun.
KAFKA_PORTS_RESERVED = 4


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKRAFT_DEBUG", None)
    return env


def _ephemeral_port_floor() -> int:
    """The lowest port the kernel hands to outgoing connections; one of those took a port this test had
    probed free before `zkraft up` bound it, so the test draws its ports below this range."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_base_port(count: int = 3) -> int:
    """A port P such that P..P+count-1 are free on loopback now (bounded random search), as are the metrics
    ports `zkraft up` derives from them (its METRICS_PORT_OFFSET higher), all below the ephemeral range."""
    rng = random.Random()
    ceiling = _ephemeral_port_floor() - up_module.METRICS_PORT_OFFSET - count
    for _ in range(PORT_SEARCH_ATTEMPTS):
        base = rng.randrange(10000, ceiling)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise AssertionError(f"no {count} consecutive free loopback ports in {PORT_SEARCH_ATTEMPTS} attempts")


@dataclass
class UpProcess:
    process: subprocess.Popen[str]
    data_dir: Path
    lines: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def output(self) -> str:
        with self.lock:
            return "".join(self.lines)

    def cluster(self) -> dict:
        return json.loads((self.data_dir / "cluster.json").read_text(encoding="utf-8"))

    def addresses(self) -> list[str]:
        return [node["address"] for node in self.cluster()["quorum"]]

    def pids(self) -> list[int]:
        """Every running child's pid: quorum nodes, brokers and the console."""
        cluster = self.cluster()
        children = [*cluster["quorum"], *cluster["brokers"], *([cluster["console"]] if "console" in cluster else [])]
        return [child["pid"] for child in children if child["pid"] is not None]

    def stop(self) -> str:
        """SIGTERM `zkraft up`, expect exit 0 and every child gone; its whole output."""
        pids = self.pids()
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=STOP_TIMEOUT_S) == 0, self.output()
        wait_until(
            lambda: not any(pid_alive(pid) for pid in pids),
            STOP_TIMEOUT_S,
            interval_s=0.1,
            message="a child process outlived zkraft up",
        )
        return self.output()


def _pump(up: UpProcess) -> None:
    assert up.process.stdout is not None
    for line in up.process.stdout:
        with up.lock:
            up.lines.append(line)


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=STATUS_RUN_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0  # not listening yet


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it has exited, so look at its state.
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _kill_recorded_children(data_dir: Path) -> None:
    """Last-resort cleanup of the node and broker processes this test's `up` recorded (by pid)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        document = json.loads((data_dir / "cluster.json").read_text(encoding="utf-8"))
        for child in [
            *document["quorum"],
            *document.get("brokers", []),
            *([document["console"]] if "console" in document else []),
        ]:
            pid = child.get("pid")
            if isinstance(pid, int) and pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def with_zk_ports(data_dir: Path, args: tuple[str, ...]) -> tuple[str, ...]:
    """`args` with free ZooKeeper client ports, Kafka listener ports and a console port for a new cluster (tests
    running at once cannot share 2181, 9092 and 8080); a rerun keeps the ports its cluster.json records."""
    if (data_dir / "cluster.json").exists():
        return args
    if "--zk-base-port" not in args:
        args = (*args, "--zk-base-port", str(free_base_port()))
    if "--kafka-base-port" not in args:
        args = (*args, "--kafka-base-port", str(free_base_port(KAFKA_PORTS_RESERVED)))
    if "--console-port" not in args:
        args = (*args, "--console-port", str(free_base_port(1)))
    return args


@contextlib.contextmanager
def running_up(data_dir: Path, *args: str, ready_line: str) -> Iterator[UpProcess]:
    """`zkraft up --data-dir data_dir ARGS` until it prints `ready_line`; stopped and cleaned up on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "zkraft", "up", "--data-dir", str(data_dir), *with_zk_ports(data_dir, args)],
        cwd=REPO_ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    up = UpProcess(process=process, data_dir=data_dir)
    pump = threading.Thread(target=_pump, args=(up,), daemon=True)
    pump.start()
    try:
        wait_until(
            lambda: ready_line in up.output() or process.poll() is not None,
            READY_TIMEOUT_S,
            interval_s=0.1,
            message=f"zkraft up never printed {ready_line!r}",
        )
        assert ready_line in up.output(), up.output()
        yield up
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
        _kill_recorded_children(data_dir)
        pump.join(timeout=STOP_TIMEOUT_S)


@pytest.fixture
def up_cluster(tmp_path: Path) -> Iterator[UpProcess]:
    """The quorum alone (--brokers 0)."""
    args = ("--brokers", "0", "--base-port", str(free_base_port()))
    with running_up(tmp_path / "cluster", *args, ready_line="quorum ready: leader is") as up:
        yield up


def status_json(addresses: list[str]) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "quorum", "status", "--server", ",".join(addresses), "--json"],
        cwd=REPO_ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STATUS_RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def settled(rows: list[dict], expected_reachable: int) -> bool:
    """One leader, every reachable node a follower of it in the same term."""
    reachable = [row for row in rows if row["role"] != "unreachable"]
    leaders = [row for row in reachable if row["role"] == "leader"]
    if len(reachable) != expected_reachable or len(leaders) != 1:
        return False
    leader = leaders[0]
    return all(row["term"] == leader["term"] and row["leader"] == leader["id"] for row in reachable)


def test_up_elects_a_leader_status_agrees_and_sigterm_stops_every_node(up_cluster: UpProcess) -> None:
    cluster = up_cluster.cluster()
    assert cluster["brokers"] == []
    assert [node["id"] for node in cluster["quorum"]] == [1, 2, 3]
    addresses = up_cluster.addresses()

    rows = wait_until(
        lambda: (r := status_json(addresses)) and settled(r, 3) and r,
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="status never showed 3 nodes agreeing on one leader",
    )
    assert isinstance(rows, list)
    assert [row["address"] for row in rows] == addresses
    assert sorted(row["id"] for row in rows) == [1, 2, 3]
    for row in rows:
        for key in ("term", "leader", "commit_index", "applied_index", "last_index", "lag"):
            assert key in row
    announced = int(up_cluster.output().split("quorum ready: leader is", 1)[1].split()[0])
    assert announced in {1, 2, 3}

    # ZooKeeper clients connect to the nodes' client ports, printed and recorded.
    zk_addresses = [node["zk_address"] for node in cluster["quorum"]]
    connect_line = f"ZooKeeper connect string: {','.join(zk_addresses)}"
    wait_until(lambda: connect_line in up_cluster.output(), READY_TIMEOUT_S, message="connect string printed")
    kazoo = KazooClient(hosts=",".join(zk_addresses), timeout=10)
    kazoo.start(timeout=READY_TIMEOUT_S)
    try:
        assert "zookeeper" in kazoo.get_children("/")
    finally:
        kazoo.stop()
        kazoo.close()
    # The four-letter words zkraft up enables (the monitoring ones, and envi for kazoo's server_version).
    for zk_address in zk_addresses:
        for word in ("ruok", "srvr", "stat", "mntr", "conf", "isro", "envi"):
            answer = four_letter_word(zk_address, word, timeout_s=STATUS_RUN_TIMEOUT_S)
            assert answer and "not executed" not in answer, (zk_address, word, answer)
        cons = four_letter_word(zk_address, "cons", timeout_s=STATUS_RUN_TIMEOUT_S)
        assert cons == "cons is not executed because it is not in the whitelist.\n"
    # Every node's /metrics and /readyz, where cluster.json says (metrics_address), as Prometheus scrapes them.
    for node in cluster["quorum"]:
        base = f"http://{node['metrics_address']}"
        wait_until(lambda b=base: http_status(f"{b}/readyz") == 200, READY_TIMEOUT_S, message=f"{base}/readyz")
        with urllib.request.urlopen(f"{base}/metrics", timeout=STATUS_RUN_TIMEOUT_S) as response:
            assert "\nraft_term " in response.read().decode()

    pids = [node["pid"] for node in cluster["quorum"]]
    up_cluster.process.send_signal(signal.SIGTERM)
    assert up_cluster.process.wait(timeout=STOP_TIMEOUT_S) == 0
    wait_until(
        lambda: not any(pid_alive(pid) for pid in pids),
        STOP_TIMEOUT_S,
        interval_s=0.1,
        message="a quorum node outlived zkraft up",
    )


def test_a_killed_node_is_reported_and_restarted_by_zkraft_up(up_cluster: UpProcess) -> None:
    cluster = up_cluster.cluster()
    addresses = up_cluster.addresses()
    rows = wait_until(
        lambda: (r := status_json(addresses)) and settled(r, 3) and r,
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="status never showed 3 nodes agreeing on one leader",
    )
    assert isinstance(rows, list)
    victim = next(row for row in rows if row["role"] == "follower")
    node = next(n for n in cluster["quorum"] if n["id"] == victim["id"])
    others = {n["id"]: n["pid"] for n in cluster["quorum"] if n["id"] != node["id"]}
    os.kill(node["pid"], signal.SIGKILL)

    wait_until(
        lambda: f"quorum node {node['id']} (pid {node['pid']}) exited unexpectedly" in up_cluster.output(),
        STOP_TIMEOUT_S,
        interval_s=0.1,
        message="zkraft up did not report the killed node",
    )
    assert up_cluster.process.poll() is None  # the rest of the cluster keeps running

    def restarted_pid() -> int | None:
        pid = next(n["pid"] for n in up_cluster.cluster()["quorum"] if n["id"] == node["id"])
        return pid if pid not in (None, node["pid"]) and pid_alive(pid) else None

    new_pid = wait_until(restarted_pid, READY_TIMEOUT_S, interval_s=0.1, message="zkraft up did not restart the node")
    # cluster.json gets the pid right after the line is printed; the pump thread may read the line later.
    restarted_line = f"quorum node {node['id']} restarted (pid {new_pid}"
    wait_until(lambda: restarted_line in up_cluster.output(), READY_TIMEOUT_S, message="restart not reported")
    wait_until(
        lambda: settled(status_json(addresses), 3),
        READY_TIMEOUT_S,
        interval_s=0.2,
        message="the restarted node did not rejoin",
    )
    assert {n["id"]: n["pid"] for n in up_cluster.cluster()["quorum"] if n["id"] != node["id"]} == others
    assert up_cluster.output().count("exited unexpectedly") == 1


# ---- brokers ----


def kafka_ports_of(up: UpProcess) -> list[str]:
    return [broker["kafka_address"] for broker in up.cluster()["brokers"]]


def broker_ports(brokers: int) -> tuple[int, int]:
    """(quorum base port, broker base port): 3 + `brokers` consecutive free ports, so the two never overlap."""
    base = free_base_port(3 + brokers)
    return base, base + 3


def zk_children(hosts: str, path: str) -> list[str]:
    zk = ZkClient(hosts, timeout=ZK_TIMEOUT_S)
    zk.start(timeout=ZK_TIMEOUT_S)
    try:
        return sorted(zk.get_children(path))
    finally:
        zk.stop()
        zk.close()


def test_up_starts_registered_brokers_stops_them_first_and_restarts_them_from_cluster_json(tmp_path: Path) -> None:
    quorum_base, broker_base = broker_ports(brokers=2)
    data_dir = tmp_path / "cluster"
    first = f"127.0.0.1:{broker_base}"
    ports = ("--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
    # A broker property for every broker; a short controlled-shutdown backoff also keeps the stops quick.
    # A short session timeout lets a broker restarted after SIGKILL take its registration back quickly.
    fast_stop = (
        "--override", "controlled.shutdown.retry.backoff.ms=100",
        "--override", "zookeeper.session.timeout.ms=4000",
    )  # fmt: skip
    with running_up(data_dir, "--brokers", "1", *ports, *fast_stop, ready_line="zkraft up: running") as up:
        output = up.output()
        [kafka] = kafka_ports_of(up)
        assert f"broker 1: {kafka} (pid " in output and f"gRPC {first}" in output
        assert "brokers ready: 1 registered, controller is broker 1" in output
        assert f"Kafka bootstrap servers: {kafka}\n" in output
        assert f"zkraft up: running; bootstrap servers {kafka}; Ctrl-C stops the cluster" in output
        assert output.index("quorum ready: leader is") < output.index("broker 1:")
        [broker] = up.cluster()["brokers"]
        assert (broker["id"], broker["address"]) == (1, first)
        # The printed list is what a Kafka client (librdkafka here) bootstraps from.
        metadata = AdminClient({"bootstrap.servers": kafka}).list_topics(timeout=ZK_TIMEOUT_S)
        assert {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {1: kafka}
        assert pid_alive(broker["pid"])
        assert broker["data_dir"] == str(data_dir / "broker-1")
        assert broker["log"] == str(data_dir / "logs" / "broker-1.log")
        properties = Path(broker["config"]).read_text(encoding="utf-8").splitlines()
        hosts = ",".join(up.addresses())
        for line in (
            "broker.id=1",
            f"port={broker_base}",
            f"listeners=PLAINTEXT://{kafka}",
            f"log.dirs={data_dir / 'broker-1'}",
        ):
            assert line in properties
        assert f"zookeeper.connect={hosts}" in properties
        assert "controlled.shutdown.retry.backoff.ms=100" in properties
        assert zk_children(hosts, "/brokers/ids") == ["1"]
        assert broker["metrics_address"] == f"127.0.0.1:{broker_base + up_module.METRICS_PORT_OFFSET}"
        readyz = f"http://{broker['metrics_address']}/readyz"
        wait_until(lambda: http_status(readyz) == 200, ZK_TIMEOUT_S, message="the broker's /readyz")
        output = up.stop()
    assert output.index("brokers stopped") < output.index("stopping 3 quorum node(s)")
    # The broker closed its session itself (a clean shutdown), so the quorum was still up when it stopped.
    assert '"broker_stopped"' in Path(broker["log"]).read_text(encoding="utf-8")

    # Again on the same directory, with one broker more: broker 1 keeps its port, broker 2 takes the next.
    with running_up(data_dir, "--brokers", "2", *fast_stop, ready_line="zkraft up: running") as up:
        brokers = up.cluster()["brokers"]
        assert [(b["id"], b["address"]) for b in brokers] == [(1, first), (2, f"127.0.0.1:{broker_base + 1}")]
        kafka_host, kafka_port = kafka.rsplit(":", 1)
        assert kafka_ports_of(up) == [kafka, f"{kafka_host}:{int(kafka_port) + 1}"]
        assert zk_children(",".join(up.addresses()), "/brokers/ids") == ["1", "2"]
        victim = brokers[1]
        os.kill(victim["pid"], signal.SIGKILL)
        wait_until(
            lambda: f"broker 2 (pid {victim['pid']}) exited unexpectedly (killed by SIGKILL)" in up.output(),
            STOP_TIMEOUT_S,
            interval_s=0.1,
            message="zkraft up did not report the killed broker",
        )
        assert up.process.poll() is None
        # zkraft up restarts it: a new pid in cluster.json, and it registers again.
        wait_until(
            lambda: (pid := up.cluster()["brokers"][1]["pid"]) not in (None, victim["pid"]) and pid_alive(pid),
            STOP_TIMEOUT_S,
            interval_s=0.1,
            message="zkraft up did not restart the killed broker",
        )
        assert up.cluster()["brokers"][0]["pid"] == brokers[0]["pid"]
        output = up.stop()
    assert output.count("exited unexpectedly") == 1
    assert "broker 2 restarted (pid " in output
    assert "stopping 2 broker(s)" in output


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("num.partiton=2", "unknown property 'num.partiton' (did you mean 'num.partitions'?)"),
        ("raft.tik.ms=5", "unknown property 'raft.tik.ms' (did you mean 'raft.tick.ms'?)"),
        ("broker.id=7", "'broker.id' is set by zkraft up for each broker"),
        ("zookeeper.connect=127.0.0.1:1", "'zookeeper.connect' is set by zkraft up for each broker"),
        ("port=1", "'port' is set by zkraft up for each broker"),
        ("listeners=PLAINTEXT://:1", "'listeners' is set by zkraft up for each broker"),
        ("listener.security.protocol.map=PLAINTEXT:SSL", "listener PLAINTEXT (SSL): ssl.truststore.location"),
        ("num.partitions=many", "num.partitions='many': not a valid integer"),
        ("quorum.state.machine=register", "cannot serve brokers"),
    ],
)
def test_bad_override_is_one_line_exit_2_and_starts_nothing(tmp_path: Path, override: str, expected: str) -> None:
    data_dir = tmp_path / "cluster"
    result = run_up_expecting_error(data_dir, "--override", override)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert not data_dir.exists()


def test_a_broker_port_in_use_is_named_in_one_line(tmp_path: Path) -> None:
    quorum_base, broker_base = broker_ports(brokers=1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", broker_base))
        holder.listen()
        args = ("--brokers", "1", "--base-port", str(quorum_base), "--broker-base-port", str(broker_base))
        result = run_up_expecting_error(tmp_path / "cluster", *args)
    assert result.returncode == 1, result.stderr
    assert f"port {broker_base} for broker 1 is already in use" in result.stderr


def run_up_expecting_error(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`zkraft up` that must refuse to start: one `zkraft: error:` line on stderr, nothing on stdout."""
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "up", "--data-dir", str(data_dir), *with_zk_ports(data_dir, args)],
        cwd=REPO_ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=ERROR_RUN_TIMEOUT_S,
    )
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("zkraft: error: ")
    return result


def test_plan_keeps_recorded_brokers_adds_new_ones_and_rests_the_rest(tmp_path: Path) -> None:
    recorded = up_module.plan(tmp_path, brokers=2, base_port=17001, broker_base_port=19092)
    up_module.write_cluster_file(recorded, {})

    grown = up_module.plan(tmp_path, brokers=3, base_port=None, broker_base_port=None)
    assert [(b.child_id, b.address) for b in grown.brokers] == [
        (1, "127.0.0.1:19092"),
        (2, "127.0.0.1:19093"),
        (3, "127.0.0.1:19094"),
    ]
    assert grown.quorum[0].address == "127.0.0.1:17001"
    assert grown.resting_brokers == []

    shrunk = up_module.plan(tmp_path, brokers=1, base_port=None, broker_base_port=None)
    assert [b.child_id for b in shrunk.brokers] == [1]
    assert [b.child_id for b in shrunk.resting_brokers] == [2]
    up_module.write_cluster_file(shrunk, {"broker 1": 4242})
    document = json.loads((tmp_path / "cluster.json").read_text(encoding="utf-8"))
    assert [(b["id"], b["pid"]) for b in document["brokers"]] == [(1, 4242), (2, None)]

    with pytest.raises(up_module.UpUsageError, match="--broker-base-port 9092: .* ports from 19092"):
        up_module.plan(tmp_path, brokers=1, base_port=None, broker_base_port=9092)


def test_plan_gives_each_broker_a_kafka_listener_and_a_rerun_keeps_the_recorded_ones(tmp_path: Path) -> None:
    recorded = up_module.plan(tmp_path, brokers=2, base_port=17001, broker_base_port=19192, kafka_base_port=29092)
    assert [(b.address, b.kafka_address) for b in recorded.brokers] == [
        ("127.0.0.1:19192", "127.0.0.1:29092"),
        ("127.0.0.1:19193", "127.0.0.1:29093"),
    ]
    assert ("127.0.0.1", 29092) in recorded.brokers[0].ports
    up_module.write_cluster_file(recorded, {})
    document = json.loads((tmp_path / "cluster.json").read_text(encoding="utf-8"))
    assert [b["kafka_address"] for b in document["brokers"]] == ["127.0.0.1:29092", "127.0.0.1:29093"]
    grown = up_module.plan(tmp_path, brokers=3, base_port=None, broker_base_port=None)
    assert [b.kafka_address for b in grown.brokers] == [f"127.0.0.1:{29092 + k}" for k in range(3)]
    with pytest.raises(up_module.UpUsageError, match="--kafka-base-port 9092: .* ports from 29092"):
        up_module.plan(tmp_path, brokers=1, base_port=None, broker_base_port=None, kafka_base_port=9092)


def test_a_cluster_json_from_before_kafka_listeners_gets_new_ports_apart_from_the_others(tmp_path: Path) -> None:
    old = up_module.plan(tmp_path, brokers=3, base_port=17001, broker_base_port=9092, kafka_base_port=29092)
    up_module.write_cluster_file(old, {})
    document = json.loads((tmp_path / "cluster.json").read_text(encoding="utf-8"))
    for broker in document["brokers"]:
        del broker["kafka_address"]  # as written before brokers had Kafka listeners (gRPC on 9092..9094)
    (tmp_path / "cluster.json").write_text(json.dumps(document), encoding="utf-8")
    rerun = up_module.plan(tmp_path, brokers=3, base_port=None, broker_base_port=None)
    assert [b.address for b in rerun.brokers] == ["127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"]
    kafka_ports = [int(b.kafka_address.rsplit(":", 1)[1]) for b in rerun.brokers]
    assert kafka_ports == list(range(kafka_ports[0], kafka_ports[0] + 3))
    assert not set(kafka_ports) & {9092, 9093, 9094, 17001, 17002, 17003}


def test_plan_gives_each_node_a_client_port_and_a_rerun_keeps_the_recorded_ones(tmp_path: Path) -> None:
    recorded = up_module.plan(tmp_path, brokers=0, base_port=17001, broker_base_port=None, zk_base_port=12181)
    assert [spec.zk_address for spec in recorded.quorum] == [f"127.0.0.1:{12181 + k}" for k in range(3)]
    assert recorded.zk_connect_string == "127.0.0.1:12181,127.0.0.1:12182,127.0.0.1:12183"
    assert "--client-port" in recorded.quorum[0].cmd
    up_module.write_cluster_file(recorded, {})
    document = json.loads((tmp_path / "cluster.json").read_text(encoding="utf-8"))
    assert [node["zk_address"] for node in document["quorum"]] == [spec.zk_address for spec in recorded.quorum]
    rerun = up_module.plan(tmp_path, brokers=0, base_port=None, broker_base_port=None)
    assert [spec.zk_address for spec in rerun.quorum] == [spec.zk_address for spec in recorded.quorum]
    with pytest.raises(up_module.UpUsageError, match="--zk-base-port 2181: .* ports from 12181"):
        up_module.plan(tmp_path, brokers=0, base_port=None, broker_base_port=None, zk_base_port=2181)
    fresh = up_module.plan(tmp_path / "fresh", brokers=0, base_port=None, broker_base_port=None)
    assert fresh.zk_connect_string == "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"


def test_up_places_its_nodes_loop_threads_unless_an_override_turns_it_off(tmp_path: Path) -> None:
    from quorum.settings import read_properties_file

    plan = up_module.plan(tmp_path, brokers=0, base_port=17001, broker_base_port=None)
    spec = plan.quorum[0]
    spec.config_path.parent.mkdir(parents=True, exist_ok=True)
    up_module.write_node_config(spec, {})
    assert read_properties_file(spec.config_path)["quorum.cpu.placement"] == "auto"
    up_module.write_node_config(spec, up_module.parse_overrides(["quorum.cpu.placement=off"]).quorum)
    assert read_properties_file(spec.config_path)["quorum.cpu.placement"] == "off"


def test_overrides_split_between_quorum_nodes_and_brokers() -> None:
    overrides = up_module.parse_overrides(["raft.tick.ms=20", "num.partitions=3", "min.insync.replicas = 2"])
    assert overrides.quorum == {"raft.tick.ms": "20"}
    assert overrides.broker == {"num.partitions": "3", "min.insync.replicas": "2"}
    with pytest.raises(up_module.UpUsageError, match="given twice"):
        up_module.parse_overrides(["num.partitions=3", "num.partitions=4"])


def test_a_broker_that_refuses_its_configuration_while_starting_is_named_with_its_log(tmp_path: Path) -> None:
    cluster_plan = up_module.plan(tmp_path, brokers=1, base_port=None, broker_base_port=None)
    cluster = up_module.LocalCluster(cluster_plan)
    [broker] = cluster_plan.brokers
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"], stdin=subprocess.DEVNULL)
    exited.wait(timeout=STOP_TIMEOUT_S)
    cluster.processes[broker.name] = exited
    with pytest.raises(up_module.UpError) as raised:
        cluster.wait_for_brokers(READY_TIMEOUT_S)
    message = str(raised.value)
    assert f"broker 1 (pid {exited.pid}) exited before registering (exit code 2: its configuration" in message
    assert str(broker.log_path) in message
    assert "\n" not in message
    assert cluster.restart_due_s == {}  # not restarted: the same configuration would be refused again


def test_a_broker_that_fails_otherwise_while_starting_is_restarted_with_the_same_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster_plan = up_module.plan(tmp_path, brokers=1, base_port=None, broker_base_port=None)
    (tmp_path / "logs").mkdir()
    [broker] = cluster_plan.brokers
    sleeper = (sys.executable, "-c", "import time; time.sleep(60)")
    broker = dataclasses.replace(broker, cmd=sleeper)
    cluster = up_module.LocalCluster(dataclasses.replace(cluster_plan, brokers=[broker]))
    broker.log_path.write_text("first line\ncannot open the log directory\n", encoding="utf-8")
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], stdin=subprocess.DEVNULL)
    exited.wait(timeout=STOP_TIMEOUT_S)
    cluster.processes[broker.name] = exited
    cluster.started_at_s[broker.name] = 0.0
    try:
        cluster.tend([broker], "before registering")
        assert broker.name in cluster.restart_due_s
        wait_until(
            lambda: cluster.tend([broker], "before registering") or cluster.processes[broker.name] is not exited,
            READY_TIMEOUT_S,
            interval_s=0.1,
            message="the broker was not restarted after its back-off",
        )
        restarted = cluster.processes[broker.name]
        assert restarted.poll() is None
        assert json.loads((tmp_path / "cluster.json").read_text(encoding="utf-8"))["brokers"][0]["pid"] == restarted.pid
    finally:
        cluster.stop()
    output = capsys.readouterr().out.splitlines()
    assert output[:4] == [
        f"broker 1 (pid {exited.pid}) exited unexpectedly (exit code 3); log: {broker.log_path}",
        "  | first line",
        "  | cannot open the log directory",
        "restarting broker 1 in 1 s (failure 1 in a row)",
    ]
    assert f"broker 1 restarted (pid {restarted.pid}, log {broker.log_path})" in output
