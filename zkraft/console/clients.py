"""The SDK clients one console holds: an Admin, a Consumer for offsets and a ZooKeeper session, made on first use.

The SDK's clients are not thread-safe and the web server answers requests on a thread pool, so every page and
action runs under one lock (`ConsoleClients.use()`): a console serves a few operators, not a fleet.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from runtime.tls import TlsConfig

CLIENT_ID = "zkraft-console"
# The console answers a person: a request that takes longer than this is reported, not waited on.
REQUEST_TIMEOUT_MS = 10_000
ZK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ConsoleTargets:
    """Where the console reads from: the Kafka bootstrap list, the quorum, the brokers' /metrics."""

    bootstrap_servers: str
    zookeeper: str | None  # the quorum nodes' host:port list (their gRPC ports, as zookeeper.connect)
    metrics_servers: tuple[str, ...]  # each broker's /metrics host:port; empty: no sizes, rates or charts
    # The SDK's security keywords from --command-config (`tls`, `sasl`: command_config.security_of); empty: plaintext.
    kafka_security: dict[str, Any] = field(default_factory=dict)
    zk_tls: TlsConfig | None = None


class ConsoleClients:
    """One Admin, one offsets Consumer and one ZkClient, each made on first use and closed by `close()`."""

    def __init__(self, targets: ConsoleTargets) -> None:
        self.targets = targets
        self._lock = threading.Lock()
        self._admin: Any = None
        self._consumer: Any = None
        self._zk: Any = None

    @contextlib.contextmanager
    def use(self) -> Iterator[ConsoleClients]:
        with self._lock:
            yield self

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from client import Admin

            self._admin = Admin(
                self.targets.bootstrap_servers,
                client_id=CLIENT_ID,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                **self.targets.kafka_security,
            )
        return self._admin

    @property
    def consumer(self) -> Any:
        """A group-less Consumer: ListOffsets for log start and end offsets (never subscribes or commits)."""
        if self._consumer is None:
            self._consumer = self.new_consumer()
        return self._consumer

    def new_consumer(self) -> Any:
        from client import Consumer

        return Consumer(
            bootstrap_servers=self.targets.bootstrap_servers,
            client_id=CLIENT_ID,
            enable_auto_commit=False,
            **self.targets.kafka_security,
        )

    @property
    def zk(self) -> Any:
        if self.targets.zookeeper is None:
            raise ConsoleUnavailable("the console was started without --zookeeper: no quorum or znode pages")
        if self._zk is None:
            from client import ZkClient

            zk = ZkClient(self.targets.zookeeper, timeout=ZK_TIMEOUT_S, tls=self.targets.zk_tls)
            zk.start(timeout=ZK_TIMEOUT_S)
            self._zk = zk
        return self._zk

    def close(self) -> None:
        for client in (self._consumer, self._admin, self._zk):
            if client is not None:
                with contextlib.suppress(Exception):  # closing at exit: a dead cluster must not stop it
                    client.close()
        self._admin = self._consumer = self._zk = None


class ConsoleUnavailable(Exception):
    """A page needs something the console was not given (e.g. --zookeeper); shown as one line."""
