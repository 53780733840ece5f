"""Bootstrap, the metadata cache and one gRPC channel per broker, shared by Producer, Consumer and Admin.

Kafka's `Metadata` + `NetworkClient` in one small object: it parses the
bootstrap list, asks any reachable broker for Metadata (docs/research/kafka.md
§3.5), keeps the answer as an immutable `ClusterSnapshot` (swapped whole, so
readers on other threads never see half an update) and hands out a
`BrokerStub` per node id over one channel per address. Calls are synchronous
gRPC; the producer's sender thread and the consumer use `.future()` on the
stubs for pipelining. With SASL (security.protocol=SASL_SSL), each channel
carries its broker's session token and a stub is handed out only once the
session is live (client/kafka/sasl_session.py).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import grpc

from client.kafka import codec
from client.kafka.client_errors import (
    KafkaConfigurationError,
    KafkaConnectionError,
    NoBrokersAvailable,
    SslAuthenticationError,
)
from client.kafka.codec import BrokerStub
from client.kafka.errors import (
    ERRORS_BY_NAME,
    NONE,
    KafkaError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    UnknownServerError,
    error_for,
)
from client.kafka.sasl_session import GrpcSaslSession, SessionInterceptor

# The metadata value types live with the SDK's others (the codec builds them); importable from here as before.
from client.kafka.types import ClusterSnapshot
from client.kafka.types import PartitionMetadata as PartitionMetadata
from client.kafka.types import TopicMetadata as TopicMetadata
from runtime import grpc_channels
from runtime.client_config import SaslCredentials
from runtime.tls import TlsConfig

# Fetch responses reach fetch_max_bytes (50 MiB by default) and produce requests max_request_size: no gRPC cap.
# A restarted broker is found again within a second, not after gRPC's default backoff of up to two minutes.
GRPC_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
PORT_MAX = 65535


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[str]:
    """`"h1:9092,h2:9092"` or a list of `"host:port"` -> list of addresses; KafkaConfigurationError if malformed."""
    if isinstance(servers, str):
        items = [s.strip() for s in servers.split(",")]
    elif isinstance(servers, Iterable):
        items = [str(s).strip() for s in servers]
    else:
        raise KafkaConfigurationError(f"bootstrap_servers must be a string or a list of host:port, got {servers!r}")
    items = [s for s in items if s]
    if not items:
        raise KafkaConfigurationError("bootstrap_servers is empty: give at least one host:port")
    for address in items:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= PORT_MAX:
            raise KafkaConfigurationError(f"bad bootstrap server {address!r}: expected host:port with port 1-65535")
    return items


def error_from_rpc(exc: grpc.RpcError, what: str) -> KafkaError:
    """A KafkaError for a failed gRPC call: the Kafka code in trailing metadata if the broker sent one."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    metadata = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    kafka_code = metadata.get("error-code") or metadata.get("kafka-error-code")
    message = f"{what}: {details}"
    if kafka_code is not None:
        if str(kafka_code).lstrip("-").isdigit() and int(kafka_code) != NONE:
            return error_for(int(kafka_code), message)
        if str(kafka_code) in ERRORS_BY_NAME:
            return ERRORS_BY_NAME[str(kafka_code)](message)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return KafkaConnectionError(message)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        # A session the broker no longer knows is a lost connection (the next call logs in again); a port that
        # requires a login this client does not make is a setting to fix.
        retriable = "log in again" in str(details)
        return KafkaConnectionError(message) if retriable else SaslAuthenticationFailedError(message)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(message)
    return UnknownServerError(message)


class KafkaClusterClient:
    """Metadata cache and broker stubs. Thread-safe: the snapshot is replaced whole under a lock."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str,
        request_timeout_ms: int = 30000,
        tls: TlsConfig | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self.tls = tls  # security.protocol=SSL: every channel is TLS (runtime.grpc_channels)
        self.sasl = sasl  # security.protocol=SASL_SSL: a login per broker (client/kafka/sasl_session.py)
        self._sessions: dict[str, GrpcSaslSession] = {}
        self.client_id = client_id
        self.request_timeout_s = request_timeout_ms / 1000.0
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, BrokerStub] = {}
        self._snapshot = ClusterSnapshot()
        self._closed = False
        self._refreshes = 0

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot

    @property
    def refresh_count(self) -> int:
        return self._refreshes

    # ------------------------------------------------------------------ stubs

    def _stub_for_address(self, address: str) -> BrokerStub:
        stub = self._stubs.get(address)
        if stub is None:
            with self._lock:
                if self._closed:
                    raise KafkaConnectionError(f"client {self.client_id} is closed")
                stub = self._stubs.get(address)
                if stub is None:
                    channel = grpc_channels.sync_channel(address, self.tls, GRPC_OPTIONS)
                    if self.sasl is not None:
                        session = GrpcSaslSession(address, channel, self.sasl, self.request_timeout_s)
                        self._sessions[address] = session
                        channel = grpc.intercept_channel(channel, SessionInterceptor(session))
                    self._channels[address] = channel
                    stub = codec.broker_stub(channel)
                    self._stubs[address] = stub
        if self.sasl is not None:
            self._sessions[address].ensure()
        return stub

    @property
    def sasl_logins(self) -> int:
        """How many times this client logged in, over every broker (tests and benchmarks read it)."""
        return sum(session.logins for session in list(self._sessions.values()))

    def stub(self, node_id: int) -> BrokerStub:
        """The stub of broker `node_id`; KafkaConnectionError if the metadata does not know it."""
        return self._stub_for_address(self._address_of(node_id))

    def channel(self, node_id: int) -> grpc.Channel:
        """The channel under `stub(node_id)`, for a call with its own (de)serializers (the Spark source's Fetch)."""
        address = self._address_of(node_id)
        self._stub_for_address(address)
        channel = self._channels.get(address)
        if channel is None:
            raise KafkaConnectionError(f"client {self.client_id} is closed")
        return channel

    def _address_of(self, node_id: int) -> str:
        broker = self._snapshot.brokers.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return f"{broker.host}:{broker.port}"

    def stub_for(self, host: str, port: int) -> BrokerStub:
        """The stub of the broker at `host:port` (a group coordinator found with FindCoordinator)."""
        return self._stub_for_address(f"{host}:{port}")

    def _candidate_addresses(self) -> list[str]:
        known = [f"{b.host}:{b.port}" for b in self._snapshot.brokers.values()]
        random.shuffle(known)
        return list(dict.fromkeys(known + self.bootstrap))

    def call_any(self, method: str, request: object, timeout_s: float | None = None) -> Any:
        """Calls `method` on the first broker that answers (known brokers, then the bootstrap list)."""
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        failures = []
        for address in self._candidate_addresses():
            try:
                return getattr(self._stub_for_address(address), method)(request, timeout=timeout)
            except (KafkaConnectionError, RequestTimedOutError) as exc:  # the login to this broker could not finish
                failures.append(str(exc))
                continue
            except grpc.RpcError as exc:
                error = error_from_rpc(exc, f"{method} to {address}")
                if not isinstance(error, KafkaConnectionError | RequestTimedOutError):
                    raise error from None
                details = exc.details() or ""
                explained = grpc_channels.explain_failure(address, self.tls, details)
                if explained is not None and grpc_channels.is_permanent(self.tls, details):
                    raise SslAuthenticationError(explained) from None
                failures.append(explained or f"{address}: {exc.code().name}")
        raise NoBrokersAvailable(f"no broker answered {method} ({'; '.join(failures)})")

    # ------------------------------------------------------------------ metadata

    def refresh(
        self, topics: Iterable[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterSnapshot:
        """Asks a broker for Metadata (all topics when `topics` is None) and installs the answer.

        With a topic list, the other topics' cached entries are kept; brokers,
        cluster id and controller always come from the new answer.
        """
        names = None if topics is None else sorted(set(topics))
        request = codec.metadata_request(names, allow_auto_topic_creation)
        answer = codec.metadata_reply(self.call_any("Metadata", request))
        with self._lock:
            merged = answer.topics if names is None else {**self._snapshot.topics, **answer.topics}
            self._snapshot = ClusterSnapshot(answer.cluster_id, answer.controller_id, answer.brokers, merged)
            self._refreshes += 1
            return self._snapshot

    def partitions_for(self, topic: str) -> set[int] | None:
        meta = self._snapshot.topics.get(topic)
        if meta is None or meta.error_code != NONE:
            return None
        return set(meta.partitions)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()
