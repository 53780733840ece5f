"""Brokers each on a host of their own, over a HostedQuorum, started as on separate machines.

    with Network() as net, HostedQuorum(net, root) as quorum, HostedBrokers(net, quorum, root) as brokers:
        quorum.start_all(); brokers.start_all()
        brokers.bootstrap_servers        # "198.18.29.13:9092,198.18.29.14:9092,..." for Kafka's clients

Broker N runs on host `bN` as `zkraft broker start --config broker-N.properties`, the server.properties a
multi-machine user writes: zookeeper.connect naming every quorum node by its address,
listeners and advertised.listeners on the broker host's own address, the gRPC endpoint (host.name, port)
there too -- no 127.0.0.1 anywhere. Each broker's output goes to root/logs/broker-N.log, its data and
state-change.log to root/broker-N/. Brokers are paused and killed by pid (`ip netns exec` execs them).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from tests.faults.cluster import CLIENT_PORT, HostedQuorum
from tests.faults.netns import Host, Network
from tests.quorum_harness import REPO_ROOT, subprocess_env

KAFKA_PORT = 9092  # Kafka's default: every broker has an address of its own
GRPC_PORT = 9192  # the broker's own gRPC endpoint (replica fetchers, the controller's requests)
KILL_WAIT_S = 10.0
# Sessions shorter than the faults' holds, so a broker cut from the quorum loses its registration (and the
# controller its /controller) while the fault lasts; the quorum caps sessions at 20 ticks of 200 ms.
BROKER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "isr.change.propagation.interval.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "unclean.leader.election.enable": "false",
    "controlled.shutdown.enable": "false",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


class HostedBrokers:
    """`n` brokers, broker N on host `bN`; a context manager that SIGKILLs what is left on exit."""

    def __init__(
        self, network: Network, quorum: HostedQuorum, root: Path, n: int = 3, properties: dict[str, str] | None = None
    ) -> None:
        self.network = network
        self.quorum = quorum
        self.root = Path(root)
        self.hosts: dict[int, Host] = {b: network.add_host(f"b{b}") for b in range(1, n + 1)}
        self.properties = {**BROKER_PROPERTIES, **(properties or {})}
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, IO[bytes]] = {}

    def __enter__(self) -> HostedBrokers:
        return self

    def __exit__(self, *exc: object) -> None:
        for broker_id in list(self._procs):
            self.kill(broker_id)

    # ---- addresses and paths
    @property
    def zookeeper_connect(self) -> str:
        """The quorum nodes' own addresses (zkraft's brokers and tools speak its gRPC ZooKeeper service)."""
        return ",".join(address for _, address in sorted(self.quorum.addresses.items()))

    @property
    def zookeeper_wire(self) -> str:
        """The quorum nodes' ZooKeeper wire ports, for ZooKeeper's own clients (kazoo)."""
        return ",".join(f"{h.address}:{CLIENT_PORT}" for _, h in sorted(self.quorum.hosts.items()))

    def kafka_address(self, broker_id: int) -> str:
        return f"{self.hosts[broker_id].address}:{KAFKA_PORT}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.kafka_address(b) for b in sorted(self.hosts))

    def data_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def log_path(self, broker_id: int) -> Path:
        return self.root / "logs" / f"broker-{broker_id}.log"

    def state_change_log(self, broker_id: int) -> Path:
        return self.data_dir(broker_id) / "state-change.log"

    def config_path(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.properties"

    def server_properties(self, broker_id: int) -> dict[str, str]:
        """What a user writes in server.properties on machine bN."""
        address = self.hosts[broker_id].address
        return {
            "broker.id": str(broker_id),
            "host.name": address,
            "port": str(GRPC_PORT),
            "listeners": f"PLAINTEXT://{address}:{KAFKA_PORT}",
            "advertised.listeners": f"PLAINTEXT://{address}:{KAFKA_PORT}",
            "log.dirs": str(self.data_dir(broker_id)),
            "zookeeper.connect": self.zookeeper_connect,
            **self.properties,
        }

    def command(self, broker_id: int) -> list[str]:
        path = self.config_path(broker_id)
        text = "".join(f"{k}={v}\n" for k, v in sorted(self.server_properties(broker_id).items()))
        path.write_text(text, encoding="utf-8")
        return [sys.executable, "-m", "zkraft", "broker", "start", "--config", str(path)]

    # ---- processes
    def start(self, broker_id: int) -> None:
        if self.alive(broker_id):
            raise RuntimeError(f"broker {broker_id} is already running")
        log = self.log_path(broker_id).open("ab")
        self._logs[broker_id] = log
        self._procs[broker_id] = self.hosts[broker_id].popen(
            self.command(broker_id), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=REPO_ROOT, env=subprocess_env(),
        )  # fmt: skip

    def start_all(self) -> None:
        for broker_id in self.hosts:
            self.start(broker_id)

    def alive(self, broker_id: int) -> bool:
        proc = self._procs.get(broker_id)
        return proc is not None and proc.poll() is None

    def kill(self, broker_id: int) -> None:
        """SIGKILL (a crash), reap, close its log."""
        proc = self._procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a paused broker dies all the same; CONT lets it be reaped at once
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)
        log = self._logs.pop(broker_id, None)
        if log is not None:
            log.close()

    def pause(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGCONT)

    def _signal(self, broker_id: int, sig: signal.Signals) -> None:
        proc = self._procs.get(broker_id)
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"broker {broker_id} is not running")
        proc.send_signal(sig)

    def exit_codes(self) -> dict[int, int | None]:
        return {broker_id: proc.poll() for broker_id, proc in self._procs.items()}
