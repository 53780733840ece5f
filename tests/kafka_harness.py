"""A whole cluster of real processes on loopback: 3 ZooKeeper-semantics quorum nodes and N brokers.

    with KafkaCluster(tmp_path, brokers=3) as cluster:
        cluster.start()                       # quorum, then brokers; waits until all brokers registered
        cluster.bootstrap_servers             # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3" (the brokers' gRPC endpoints)
        cluster.kafka_bootstrap_servers       # the brokers' Kafka listeners, for Kafka's own clients
        cluster.zookeeper                     # "127.0.0.1:q1,..." for ZkClient / `zkraft topics --zookeeper`
        cluster.create_topic("t", partitions=8, replication_factor=3)   # via `zkraft topics`, waits for leaders
        cluster.kill_broker(2); cluster.start_broker(2)                  # SIGKILL / restart on the same data

Each broker is `python -m zkraft broker start --config root/broker-N.properties`,
its data in root/broker-N/, its output appended to root/logs/broker-N.log.
Broker properties for every broker come from `broker_properties`; tests pass
short timeouts (e.g. replica.lag.time.max.ms) there. Waiting is always
polling with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from client import ZkClient
from client.kafka.znodes import decode_partition_state, decode_topic, partition_state_path, topic_path
from client.zk.exceptions import NoNodeError
from tests.helpers import wait_until
from tests.quorum_harness import LOOPBACK, REPO_ROOT, QuorumProcesses, free_ports, subprocess_env

KILL_WAIT_S = 10.0
START_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 20
# A broker whose port was taken between choosing and binding it is restarted on another port this often.
PORT_RETRIES = 3
# Quorum settings that make sessions and elections quick on loopback.
QUORUM_PROPERTIES = {"quorum.state.machine": "zookeeper", "tickTime": "200"}
BROKER_DEFAULTS = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "auto.leader.rebalance.enable": "false",
    "isr.change.propagation.interval.ms": "200",
}


class KafkaCluster:
    def __init__(
        self,
        root: Path,
        brokers: int = 3,
        broker_properties: dict[str, str] | None = None,
        quorum_properties: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        self.quorum = QuorumProcesses(self.root / "quorum", 3, {**QUORUM_PROPERTIES, **(quorum_properties or {})})
        self.broker_ids = list(range(1, brokers + 1))
        ports = free_ports(2 * brokers)  # one call: the gRPC and Kafka ports are distinct
        self.ports = dict(zip(self.broker_ids, ports[:brokers], strict=True))
        self.kafka_ports = dict(zip(self.broker_ids, ports[brokers:], strict=True))
        self.properties = {**BROKER_DEFAULTS, **(broker_properties or {})}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, IO[bytes]] = {}
        self._zk: ZkClient | None = None

    # ---------------------------------------------------------------- addresses

    @property
    def zookeeper(self) -> str:
        return ",".join(self.quorum.addresses[n] for n in sorted(self.quorum.addresses))

    def broker_address(self, broker_id: int) -> str:
        return f"{LOOPBACK}:{self.ports[broker_id]}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.broker_address(b) for b in self.broker_ids)

    def kafka_address(self, broker_id: int) -> str:
        """The broker's Kafka listener (`listeners=PLAINTEXT://...`), for Kafka's binary protocol."""
        return f"{LOOPBACK}:{self.kafka_ports[broker_id]}"

    @property
    def kafka_bootstrap_servers(self) -> str:
        return ",".join(self.kafka_address(b) for b in self.broker_ids)

    def data_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def log_path(self, broker_id: int) -> Path:
        return self.root / "logs" / f"broker-{broker_id}.log"

    # ---------------------------------------------------------------- lifecycle

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.quorum.start_all()
        for broker_id in self.broker_ids:
            self.start_broker(broker_id, wait=False)
        self.wait_registered(self.broker_ids, timeout_s)
        self.wait_controller(timeout_s)

    def write_config(self, broker_id: int) -> Path:
        properties = {
            "broker.id": str(broker_id),
            "host.name": LOOPBACK,
            "port": str(self.ports[broker_id]),
            "listeners": f"PLAINTEXT://{self.kafka_address(broker_id)}",
            "log.dirs": str(self.data_dir(broker_id)),
            "zookeeper.connect": self.zookeeper,
            **self.properties,
        }
        path = self.root / f"broker-{broker_id}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in sorted(properties.items())), encoding="utf-8")
        return path

    def command(self, broker_id: int) -> list[str]:
        return [sys.executable, "-m", "zkraft", "broker", "start", "--config", str(self.write_config(broker_id))]

    def start_broker(self, broker_id: int, wait: bool = True, timeout_s: float = START_TIMEOUT_S) -> None:
        if self.alive(broker_id):
            raise RuntimeError(f"broker {broker_id} is already running")
        self._close_log(broker_id)
        log = self.log_path(broker_id).open("ab")
        self._logs[broker_id] = log
        self._procs[broker_id] = subprocess.Popen(
            self.command(broker_id),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=subprocess_env(),
        )
        if wait:
            self.wait_registered([broker_id], timeout_s)

    def kill_broker(self, broker_id: int) -> None:
        proc = self._procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)
        self._close_log(broker_id)

    def stop_broker(self, broker_id: int, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait; a broker that outlives `timeout_s` is SIGKILLed and reported."""
        proc = self._procs[broker_id]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill_broker(broker_id)
                raise AssertionError(f"broker {broker_id} ignored SIGTERM\n{self.log_tail(broker_id)}") from None
        self._close_log(broker_id)
        return proc.returncode

    def pause_broker(self, broker_id: int) -> None:
        self._procs[broker_id].send_signal(signal.SIGSTOP)

    def resume_broker(self, broker_id: int) -> None:
        self._procs[broker_id].send_signal(signal.SIGCONT)

    def pid(self, broker_id: int) -> int | None:
        proc = self._procs.get(broker_id)
        return None if proc is None else proc.pid

    def alive(self, broker_id: int) -> bool:
        proc = self._procs.get(broker_id)
        return proc is not None and proc.poll() is None

    def stop_all(self) -> None:
        for broker_id in list(self._procs):
            with contextlib.suppress(Exception):
                self.resume_broker(broker_id)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.kill_broker(broker_id)
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
            self._zk = None
        self.quorum.stop_all()

    def assert_alive(self, *broker_ids: int) -> None:
        for broker_id in broker_ids or tuple(self._procs):
            if not self.alive(broker_id):
                raise AssertionError(f"broker {broker_id} exited\n{self.log_tail(broker_id)}")

    # ---------------------------------------------------------------- ZooKeeper view

    @property
    def zk(self) -> ZkClient:
        if self._zk is None:
            self._zk = ZkClient(self.zookeeper, timeout=30)
            self._zk.start()
        return self._zk

    def registered_brokers(self) -> list[int]:
        try:
            return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def wait_registered(self, broker_ids: list[int], timeout_s: float = START_TIMEOUT_S) -> None:
        retries = dict.fromkeys(broker_ids, PORT_RETRIES)

        def check() -> bool:
            for broker_id in broker_ids:
                if not self.alive(broker_id) and retries[broker_id] > 0 and self._lost_its_port(broker_id):
                    # The port was free when chosen, but another socket (often an outgoing connection's
                    # ephemeral port) took it before the broker bound it: choose again.
                    retries[broker_id] -= 1
                    self.ports[broker_id], self.kafka_ports[broker_id] = free_ports(2)
                    self.start_broker(broker_id, wait=False)
            self.assert_alive(*broker_ids)
            return set(broker_ids) <= set(self.registered_brokers())

        wait_until(check, timeout_s, interval_s=0.05, message=f"brokers {broker_ids} did not register")

    def _lost_its_port(self, broker_id: int) -> bool:
        return "cannot listen on" in "\n".join(self.log_text(broker_id).splitlines()[-5:])

    def controller_id(self) -> int | None:
        try:
            data, _ = self.zk.get("/controller")
        except NoNodeError:
            return None
        return int(json.loads(data)["brokerid"])

    def wait_controller(self, timeout_s: float = START_TIMEOUT_S) -> int:
        return int(wait_until(self.controller_id, timeout_s, interval_s=0.05, message="no controller elected"))

    def partition_state(self, topic: str, partition: int) -> Any:
        try:
            data, _ = self.zk.get(partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return decode_partition_state(topic, partition, data)

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        data, _ = self.zk.get(topic_path(topic))
        return dict(decode_topic(topic, data).partitions)

    def create_topic(
        self, topic: str, partitions: int = 1, replication_factor: int = 1, timeout_s: float = 30.0, **configs: str
    ) -> None:
        """`zkraft topics --create` against the quorum, then wait until every partition has a leader in ISR."""
        command = [
            sys.executable, "-m", "zkraft", "topics", "--zookeeper", self.zookeeper, "--create",
            "--topic", topic, "--partitions", str(partitions), "--replication-factor", str(replication_factor),
        ]  # fmt: skip
        for key, value in configs.items():
            command += ["--config", f"{key.replace('_', '.')}={value}"]
        done = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"topic creation failed: {done.stderr.strip()}")
        self.wait_leaders(topic, partitions, timeout_s)

    def wait_leaders(self, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
        def ready() -> bool:
            for p in range(partitions):
                state = self.partition_state(topic, p)
                if state is None or state.leader < 0:
                    return False
            return True

        wait_until(ready, timeout_s, interval_s=0.05, message=f"topic {topic} has partitions without a leader")

    # ---------------------------------------------------------------- logs

    def log_text(self, broker_id: int) -> str:
        path = self.log_path(broker_id)
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def log_events(self, broker_id: int, event: str | None = None) -> list[dict[str, Any]]:
        events = []
        for line in self.log_text(broker_id).splitlines():
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if event is None or record.get("event") == event:
                    events.append(record)
        return events

    def log_tail(self, broker_id: int, lines: int = LOG_TAIL_LINES) -> str:
        tail = self.log_text(broker_id).splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path(broker_id)}:\n" + "\n".join(tail)

    def _close_log(self, broker_id: int) -> None:
        log = self._logs.pop(broker_id, None)
        if log is not None:
            log.close()
