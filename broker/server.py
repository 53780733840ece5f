"""`zkraft broker start`: one broker process (Kafka's `KafkaServer.startup` / `shutdown` order).

Start-up: open the logs (recovering after a crash), connect to the quorum as
a ZooKeeper client, read or create the cluster id, start the gRPC service,
register `/brokers/ids/<id>` (ephemeral, Kafka's JSON; its czxid is the
broker epoch), start the controller elector. A previous registration of the
same id that is still held by a dead session is waited out (bounded by the
session timeout), so a broker restarted at once after SIGKILL rejoins.

Shutdown (SIGTERM/SIGINT): stop the controller, stop fetchers and the
service, close the ZooKeeper session (its ephemeral registration goes with
it), close the logs cleanly (checkpoints and the clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import base64
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import structlog

from broker.admin_manager import AdminManager
from broker.authorizer.authorizer import AclAuthorizer, start_authorizer
from broker.config import BrokerConfig
from broker.config_changes import ConfigChangeListener
from broker.damaged_logs import publish_damage_claim
from broker.group.api import build_group_api
from broker.grpc_authentication import GrpcAuthentication
from broker.kafka_listener import KafkaListenerServer
from broker.listener_tls import listener_tls_config, server_context
from broker.log import LogConfig, dir_failure
from broker.log_housekeeping import LogHousekeeper
from broker.log_manager import LogManager
from broker.metadata_cache import MetadataCache
from broker.metrics import start_broker_ops
from broker.periodic import every
from broker.producer_ids import ProducerIdManager
from broker.registration_guard import RegistrationGuard
from broker.replica_fetcher import ReplicaFetcherManager
from broker.replica_manager import ReplicaManager
from broker.request_bounds import BytesInFlight
from broker.sasl.authenticator import SaslListener
from broker.sasl.credential_cache import ScramCredentialCache
from broker.sasl.grpc_login import GrpcSaslLogin
from broker.sasl.settings import listener_sasl_settings
from broker.service import BrokerService, add_broker_service
from broker.tls_settings import grpc_requires_sasl, grpc_tls, zookeeper_tls
from broker.topic_config import log_config_for
from client.kafka.structs import TopicPartition
from client.kafka.znodes import (
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONTROLLER_PATH,
    GRPC_LISTENER_NAME,
    PERSISTENT_PATHS,
    BrokerRegistration,
    EndPoint,
    broker_path,
    decode_broker,
    decode_cluster_id,
    decode_controller,
    encode_broker,
    encode_cluster_id,
    secure_default_acls,
)
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import AuthFailedError, NodeExistsError, NoNodeError
from client.zk.states import ZkState
from runtime import event_loop, grpc_channels
from runtime.halt import EXIT_STORAGE_FAILED, halt
from runtime.heap_tuning import retain_freed_buffers
from runtime.json_logging import configure_logging
from runtime.metrics_http import OpsHttpServer
from runtime.tls import TlsConfigError
from zkraft_proto import broker_pb2, broker_pb2_grpc

# gRPC messages carry whole fetch responses (fetch.max.bytes at most) and produce requests.
GRPC_SEND_MESSAGE_BYTES_MAX = 128 * 1024 * 1024


def grpc_server_options(config: BrokerConfig) -> list[tuple[str, int]]:
    """The request bounds gRPC enforces before the broker sees a request (broker/request_bounds.py).

    `socket.request.max.bytes` is the largest message gRPC reads (a larger one is
    refused with RESOURCE_EXHAUSTED before the handler runs); the HTTP/2 streams
    one connection may hold at once are `max.concurrent.streams.per.connection`
    (further calls wait in the client), so one connection can never have more
    than that many requests in the broker.
    """
    return [
        ("grpc.max_receive_message_length", config.socket_request_max_bytes),
        ("grpc.max_send_message_length", GRPC_SEND_MESSAGE_BYTES_MAX),
        ("grpc.max_concurrent_streams", config.max_concurrent_streams_per_connection),
        ("grpc.so_reuseport", 0),
    ]


# A lost ZooKeeper session is re-established with this many attempts (backing off to 5 s).
REREGISTER_ATTEMPTS = 120
REGISTER_ATTEMPTS = 5  # registrations in a row whose session was lost before the guard read them


class BrokerStartupError(Exception):
    """The broker cannot start: one line for the operator."""


def default_log_config(config: BrokerConfig) -> LogConfig:
    return log_config_for(config, {})


def startup_retry_policy(config: BrokerConfig) -> dict[str, float | bool]:
    """How the broker's start-up calls (`zk.retry`) ride out a lost connection: a server that stops answering
    is dropped and the client moves to another one within the session, so a ConnectionLoss is retried until
    zookeeper.connection.timeout.ms has passed (Kafka's KafkaZkClient.retryRequestsUntilConnected), instead of
    ending the broker. A SessionExpiredError is retried too: the broker's state listener starts a new session
    at once (Broker._on_zk_state, as Kafka's ZooKeeperClient reinitializes itself), and the call runs again in
    it. Every start-up step retried is idempotent (create tolerating NodeExists, our own ephemeral recognised
    by its owner, a claim merged)."""
    return {
        "max_tries": -1,
        "max_delay": 1.0,
        "deadline": config.zookeeper_connection_timeout_ms / 1000,
        "ignore_expire": True,
    }


def zookeeper_sasl_options(config: BrokerConfig) -> dict[str, str] | None:
    """The broker's SASL DIGEST-MD5 login to the quorum (its JAAS Client section), as kazoo's sasl_options."""
    if config.zookeeper_login is None:
        return None
    username, password = config.zookeeper_login
    return {"mechanism": "DIGEST-MD5", "username": username, "password": password}


async def create_top_level_paths(zk: AsyncZkClient) -> None:
    """KafkaZkClient.createTopLevelPaths: ZkData.PersistentZkPaths, each with its own default ACL (a znode
    created later with makepath finds its parents there, instead of giving them its own ACL)."""
    for path in PERSISTENT_PATHS:
        await zk.ensure_path(path)


async def ensure_cluster_id(zk: AsyncZkClient) -> str:
    """The cluster id from `/cluster/id`, created (a random base64 UUID, as Kafka's) by the first broker."""
    try:
        data, _ = await zk.get(CLUSTER_ID_PATH)
        return decode_cluster_id(data)
    except NoNodeError:
        pass
    candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    try:
        await zk.create(CLUSTER_ID_PATH, encode_cluster_id(candidate), makepath=True)
        return candidate
    except NodeExistsError:
        data, _ = await zk.get(CLUSTER_ID_PATH)
        return decode_cluster_id(data)


def registered_endpoints(config: BrokerConfig, kafka_endpoints: tuple[EndPoint, ...]) -> tuple[EndPoint, ...]:
    """The Kafka listeners' endpoints first (the top-level host/port Kafka writes is the first PLAINTEXT one, the
    address Kafka's own tools read), then the gRPC endpoint under its own listener name (broker/listeners.py)."""
    return (*kafka_endpoints, EndPoint(config.host, config.port, GRPC_LISTENER_NAME, "PLAINTEXT"))


async def register_broker(
    zk: AsyncZkClient, config: BrokerConfig, log: Any, kafka_endpoints: tuple[EndPoint, ...] = ()
) -> None:
    """Creates the ephemeral `/brokers/ids/<id>` in the current session (Broker._register reads its epoch)."""
    registration = BrokerRegistration(
        broker_id=config.broker_id,
        endpoints=registered_endpoints(config, kafka_endpoints),
        rack=config.rack or None,
        timestamp_ms=time.time_ns() // 1_000_000,
    )
    data = encode_broker(registration)
    path = broker_path(config.broker_id)
    await zk.ensure_path(BROKER_IDS_PATH)
    deadline = time.monotonic() + config.zookeeper_session_timeout_ms / 1000 * 2 + 5
    announced = False
    while True:
        try:
            await zk.create(path, data, ephemeral=True)
            return
        except NodeExistsError:
            stat = await zk.exists(path)
            if stat is not None and stat.ephemeralOwner == zk.client_id[0]:
                return
            if time.monotonic() > deadline:
                raise BrokerStartupError(
                    f"broker id {config.broker_id} is registered at {path} by another live broker"
                ) from None
            if not announced:
                log.info("waiting_for_previous_registration_to_expire", path=path)
                announced = True
            await _wait_deleted(zk, path, deadline)


async def _wait_deleted(zk: AsyncZkClient, path: str, deadline: float) -> None:
    gone = asyncio.Event()

    def on_event(event: Any) -> None:
        gone.set()

    if await zk.exists(path, watch=on_event) is None:
        return
    try:
        await asyncio.wait_for(gone.wait(), max(0.1, deadline - time.monotonic()))
    except TimeoutError:
        pass


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.log = structlog.get_logger("zkraft.broker").bind(broker=config.broker_id)
        self.zk: AsyncZkClient | None = None
        self.server: grpc.aio.Server | None = None
        self.controller: Any = None
        self.replicas: ReplicaManager | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.logs: LogManager | None = None
        self.broker_epoch = -1
        self._registering = False  # start-up has begun to register: a new session registers again
        self._registration_lock = asyncio.Lock()
        self._stopping = False
        self._housekeeping: list[asyncio.Task[None]] = []
        self.config_changes: ConfigChangeListener | None = None
        self.authorizer: AclAuthorizer | None = None
        self._reregister_task: asyncio.Future[None] | None = None
        self.registration_guard: RegistrationGuard | None = None
        self.requests_in_flight: BytesInFlight | None = None
        self.kafka_listeners: list[KafkaListenerServer] = []
        self.kafka_endpoints: tuple[EndPoint, ...] = ()
        self.scram_credentials: ScramCredentialCache | None = None
        self.groups: Any = None  # the GroupApi, whose coordinator's offsets give consumer-group lag (broker/metrics.py)
        self.ops_server: OpsHttpServer | None = None  # /metrics, /healthz, /readyz on metrics.port

    async def start(self) -> None:
        config = self.config
        self.logs = LogManager(config.directories, default_log_config(config), self.log)
        self.zk = zk = AsyncZkClient(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            tls=zookeeper_tls(config),
            command_retry=startup_retry_policy(config),
            sasl_options=zookeeper_sasl_options(config),
            default_acl=secure_default_acls if config.zookeeper_set_acl else None,
            # Follow the quorum's members (/zookeeper/config): zookeeper.connect may name nodes since removed.
            ensemble_tracker=True,
        )
        try:
            await zk.start(timeout=config.zookeeper_connection_timeout_ms / 1000)
        except AuthFailedError as exc:
            raise BrokerStartupError(
                f"the quorum at {config.zookeeper_connect} refused the broker's login: {exc}"
            ) from None
        except Exception as exc:
            raise BrokerStartupError(f"cannot reach the quorum at {config.zookeeper_connect}: {exc}") from None
        # From here on a lost session is replaced at once, also during start-up: its calls (zk.retry) then run
        # again in the new session instead of ending the broker (found by the Kafka fault campaign, seed 295).
        zk.add_listener(self._on_zk_state)
        if config.zookeeper_set_acl:
            await zk.retry(create_top_level_paths, zk)
        cluster_id = await zk.retry(ensure_cluster_id, zk)
        state_change = _state_change_logger(config)
        self.replicas = replicas = ReplicaManager(
            config, self.logs, zk, self.log, state_change=lambda m: state_change.broker(m) if state_change else None
        )
        self.fetchers = replicas.fetchers = ReplicaFetcherManager(config, replicas, self.log)
        metadata = MetadataCache(config.broker_id, cluster_id)
        admin = AdminManager(config, zk, metadata, self.log)
        service = BrokerService(replicas, metadata, admin, self.log)
        if state_change is not None:
            service.state_change = state_change.broker
        service.producer_ids = ProducerIdManager(config.broker_id, zk, self.log)
        service.groups = self.groups = build_group_api(config, replicas, metadata, admin, self.log)
        # Before any listener serves a request: every check then sees the ACLs loaded (None: no authorizer).
        service.authorizer = self.authorizer = await zk.retry(start_authorizer, config, zk, self.log)
        try:
            self.ops_server = start_broker_ops(self)
        except OSError as exc:
            raise BrokerStartupError(
                f"cannot serve metrics on {config.metrics_host}:{config.metrics_port}: {exc}"
            ) from None
        service.authentication = await self._grpc_authentication()
        self.server = grpc.aio.server(options=grpc_server_options(config))
        self.requests_in_flight = BytesInFlight(config.queued_max_request_bytes, self.log)
        add_broker_service(service, self.server, self.requests_in_flight, config.request_timeout_ms / 1000, self.log)
        try:
            port = grpc_channels.add_port(self.server, config.address, grpc_tls(config))
        except RuntimeError:
            port = 0
        if port == 0:
            raise BrokerStartupError(f"cannot listen on {config.address} (port in use?)")
        await self.server.start()
        await self._start_kafka_listeners(service)
        replicas.start()
        self._start_housekeeping(replicas)
        # Before registering: a controller that sees this broker live must see its damaged logs too.
        await zk.retry(publish_damage_claim, zk, config.broker_id, self.logs.lost_data, self.log)
        self._registering = True  # a session lost from here on is followed by a registration in the next one
        await zk.retry(self._register)
        self.controller = _make_controller(config, zk, self.broker_epoch, state_change, self.log)
        service.controller = self.controller
        if self.controller is not None:
            await self.controller.startup()
        self.config_changes = ConfigChangeListener(
            zk,
            replicas.apply_topic_config,
            self.log,
            on_user_config=self.scram_credentials.update if self.scram_credentials is not None else None,
        )
        await zk.retry(self.config_changes.start)
        self.log.info(
            "broker_started",
            address=config.address,
            kafka_endpoints=[e.connection_string for e in self.kafka_endpoints],
            cluster_id=cluster_id,
            log_dirs=[str(d) for d in config.directories],
        )

    async def _start_kafka_listeners(self, service: BrokerService) -> None:
        """Binds each Kafka listener (broker/kafka_listener.py); a bound port 0 is what gets registered."""
        config = self.config
        assert self.requests_in_flight is not None
        grpc_host = "127.0.0.1" if config.host in ("", "0.0.0.0") else config.host
        for listener in config.kafka_listeners:
            sasl = await self._sasl_listener(listener.name, listener.advertised.security_protocol)
            try:
                tls = listener_tls_config(config.given, listener.name, listener.advertised.security_protocol)
                context = None if tls is None else server_context(tls, listener.name)
            except TlsConfigError as exc:
                raise BrokerStartupError(str(exc)) from None
            server = KafkaListenerServer(
                listener,
                service,
                self.requests_in_flight,
                request_max_bytes=config.socket_request_max_bytes,
                pipelined_requests_max=config.max_concurrent_streams_per_connection,
                request_timeout_s=config.request_timeout_ms / 1000,
                # A SASL listener hands no connection to gRPC: nothing passes it without logging in.
                grpc_address=None if sasl is not None else f"{grpc_host}:{config.port}",
                logger=self.log,
                sasl=sasl,
                tls=context,
            )
            try:
                bound_port = await server.start()
            except OSError as exc:
                where = f"{listener.bind_host or ''}:{listener.bind_port}"
                raise BrokerStartupError(f"cannot listen on {where} for listener {listener.name}: {exc}") from None
            self.kafka_listeners.append(server)
            self.kafka_endpoints += (listener.registered(bound_port),)

    async def _sasl_listener(self, listener_name: str, security_protocol: str) -> SaslListener | None:
        """A SASL_ listener's authentication (broker/sasl/), with the SCRAM credentials every such listener
        shares; None for a listener without SASL."""
        if not security_protocol.startswith("SASL_"):
            return None
        credentials = await self._scram_credentials()
        return SaslListener(listener_sasl_settings(listener_name, self.config.given), credentials)

    async def _scram_credentials(self) -> ScramCredentialCache:
        """The SCRAM credentials every SASL listener and the gRPC port share, loaded from /config/users once."""
        if self.scram_credentials is None:
            assert self.zk is not None
            self.scram_credentials = ScramCredentialCache(self.zk, self.log)
            await self.zk.retry(self.scram_credentials.start)
        return self.scram_credentials

    async def _grpc_authentication(self) -> GrpcAuthentication:
        """How the gRPC port knows its callers (broker/grpc_authentication.py): a SASL login when its listener
        GRPC is SASL_SSL, client certificates with ssl.client.auth=required."""
        config = self.config
        tls = grpc_tls(config)
        login = None
        if grpc_requires_sasl(config):
            settings = listener_sasl_settings(GRPC_LISTENER_NAME, config.given)
            login = GrpcSaslLogin(settings, await self._scram_credentials(), self.log)
        return GrpcAuthentication(login, mutual_tls=tls is not None and tls.client_auth == "required")

    def _start_housekeeping(self, replicas: ReplicaManager) -> None:
        """Retention and compaction tasks over every log (broker/log_housekeeping.py)."""
        assert self.logs is not None

        def high_watermark(tp: TopicPartition) -> int | None:
            partition = replicas.partitions.get(tp)
            return None if partition is None else partition.high_watermark

        keeper = LogHousekeeper(self.config, self.logs, high_watermark, self.log)
        self._housekeeping = [
            asyncio.create_task(
                every(self.config.log_retention_check_interval_ms / 1000, keeper.enforce_retention, self.log)
            )
        ]
        if self.config.log_cleaner_enable:
            self._housekeeping.append(
                asyncio.create_task(every(self.config.log_cleaner_backoff_ms / 1000, keeper.clean_once, self.log))
            )

    def _on_zk_state(self, state: ZkState) -> None:
        """A lost session took the registration with it: start a new one (Kafka's afterInitializingSession).
        Before start-up registers, only the session is renewed; start-up's own steps then run in it."""
        if state is ZkState.LOST and not self._stopping and self._reregister_task is None:
            self._reregister_task = asyncio.ensure_future(self._reestablish_session())

    async def _reestablish_session(self) -> None:
        assert self.zk is not None
        try:
            for attempt in range(1, REREGISTER_ATTEMPTS + 1):
                if self._stopping:
                    return
                try:
                    await self.zk.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
                    if self._registering:
                        await self._register()
                    break
                except Exception as exc:  # the quorum may be unreachable for a while: keep trying, bounded
                    self.log.warning("session_reestablish_failed", attempt=attempt, error=str(exc))
                    await asyncio.sleep(min(5.0, 0.2 * attempt))
            else:
                self.log.error("session_reestablish_gave_up", attempts=REREGISTER_ATTEMPTS)
                return
            self.log.info("session_reestablished", broker_epoch=self.broker_epoch)
            if self.controller is not None:
                await self.controller.session_reestablished(self.broker_epoch)
        finally:
            self._reregister_task = None

    async def _register(self) -> None:
        """Register in the current session and guard that registration; its czxid is the broker epoch.

        Start-up and a new session's re-registration take turns (the lock). A session lost between the create
        and the guard's read leaves nothing to guard: register again, in the session that replaced it.
        """
        assert self.zk is not None
        async with self._registration_lock:
            for _ in range(REGISTER_ATTEMPTS):
                await register_broker(self.zk, self.config, self.log, self.kafka_endpoints)
                try:
                    self.broker_epoch = await self._guard_registration()
                except NoNodeError:
                    self.log.info("registration_lost_before_guarded", reason="its session was replaced")
                    continue
                self.log.info(
                    "broker_registered",
                    path=broker_path(self.config.broker_id),
                    broker_epoch=self.broker_epoch,
                    address=self.config.address,
                    kafka_endpoints=[e.connection_string for e in self.kafka_endpoints],
                )
                return
            raise BrokerStartupError(f"lost the registration's session {REGISTER_ATTEMPTS} times in a row")

    async def _guard_registration(self) -> int:
        """Keep `/brokers/ids/<id>` while this session lives (broker/registration_guard.py); its czxid."""
        assert self.zk is not None
        if self.registration_guard is None:
            self.registration_guard = RegistrationGuard(
                self.zk, self.config.broker_id, self._on_registration_restored, self.log
            )
        return await self.registration_guard.guard()

    def _on_registration_restored(self, broker_epoch: int) -> None:
        """A re-created registration is a new broker epoch, as after a new session."""
        self.broker_epoch = broker_epoch
        if self.controller is not None:
            self.controller.broker_epoch = broker_epoch

    async def controlled_shutdown(self) -> bool:
        """Asks the controller to move this broker's leaderships away first (Kafka's controlledShutdown).

        Retried `controlled.shutdown.max.retries` times; True when the controller
        reported nothing left. Shutdown goes on either way, as in Kafka.
        """
        config, zk = self.config, self.zk
        if not config.controlled_shutdown_enable or zk is None or not zk.connected or self.broker_epoch < 0:
            return False  # a broker that never registered leads nothing
        request = broker_pb2.ControlledShutdownRequest(broker_id=config.broker_id, broker_epoch=self.broker_epoch)
        for attempt in range(config.controlled_shutdown_max_retries + 1):
            if attempt:
                await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
            address = await _controller_address(zk)
            if address is None:
                continue
            try:
                async with grpc_channels.aio_channel(address, grpc_tls(config)) as channel:
                    response = await broker_pb2_grpc.BrokerStub(channel).ControlledShutdown(
                        request, timeout=config.controller_socket_timeout_ms / 1000
                    )
            except grpc.aio.AioRpcError as exc:
                self.log.info("controlled_shutdown_attempt_failed", attempt=attempt + 1, code=exc.code().name)
                continue
            remaining = [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions]
            if response.error_code == 0 and not remaining:
                self.log.info("controlled_shutdown_succeeded", attempts=attempt + 1)
                return True
            self.log.info(
                "controlled_shutdown_incomplete",
                attempt=attempt + 1,
                error_code=response.error_code,
                remaining=remaining,
            )
        self.log.warning("controlled_shutdown_failed", retries=config.controlled_shutdown_max_retries)
        return False

    async def stop(self) -> None:
        self.log.info("broker_stopping")
        self._stopping = True
        try:
            await self.controlled_shutdown()
        except Exception as exc:  # shutdown must go on
            self.log.warning("controlled_shutdown_error", error=str(exc))
        if self.controller is not None:
            await self.controller.shutdown()
        if self._reregister_task is not None:
            self._reregister_task.cancel()
        if self.config_changes is not None:
            await self.config_changes.stop()
        if self.authorizer is not None:
            await self.authorizer.stop()
        for task in self._housekeeping:
            task.cancel()
        await asyncio.gather(*self._housekeeping, return_exceptions=True)
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.registration_guard is not None:
            await self.registration_guard.stop()  # before the session's end deletes the registration
        if self.zk is not None:
            await self.zk.stop()  # the registration (ephemeral) goes with the session
        for listener in self.kafka_listeners:
            await listener.stop()
        if self.server is not None:
            await self.server.stop(grace=1.0)
        if self.replicas is not None:
            await self.replicas.stop()
        if self.logs is not None:
            self.logs.close()
        if self.ops_server is not None:
            self.ops_server.stop()
        self.log.info("broker_stopped")


async def _controller_address(zk: AsyncZkClient) -> str | None:
    """host:port of the broker named in /controller, or None while there is none."""
    try:
        data, _ = await zk.get(CONTROLLER_PATH)
        controller = decode_controller(data).broker_id
        data, _ = await zk.get(broker_path(controller))
    except NoNodeError:
        return None
    registration = decode_broker(controller, data)
    endpoint = registration.grpc_endpoint()
    if endpoint is None or endpoint.host is None:
        return None
    return f"{endpoint.host}:{endpoint.port}"


def _state_change_logger(config: BrokerConfig) -> Any:
    try:
        from broker.state_change_log import StateChangeLogger
    except ImportError:
        return None
    return StateChangeLogger(Path(config.directories[0]) / "state-change.log", config.broker_id)


def _make_controller(config: BrokerConfig, zk: AsyncZkClient, broker_epoch: int, state_change: Any, log: Any) -> Any:
    try:
        from broker.controller.controller import KafkaController
    except ImportError:
        log.warning("controller_not_available")
        return None
    tls = grpc_tls(config)  # security.inter.broker.protocol: the controller's requests too

    def channel_factory(address: str) -> grpc.aio.Channel:
        return grpc_channels.aio_channel(address, tls)

    return KafkaController(config, zk, broker_epoch, state_change, log, channel_factory=channel_factory)


async def run(config: BrokerConfig, stop: asyncio.Event | None = None) -> int:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    broker = Broker(config)
    try:
        await broker.start()
        await stop.wait()
    finally:
        await broker.stop()
    return 0


def _halt_on_log_dir_failure(config: BrokerConfig) -> dir_failure.FailureHandler:
    """Kafka 2.8 with its last log directory offline: one fatal line, then Exit.halt(1) (broker.log.dir_failure).
    No clean shutdown: it would flush and checkpoint on the directory that just failed."""
    log = structlog.get_logger("zkraft.broker").bind(broker=config.broker_id)

    def handle(partition_dir: Path, operation: str, exc: OSError) -> None:
        log.critical(
            "log_dir_failed",
            log_dir=str(partition_dir.parent),
            partition_dir=partition_dir.name,
            operation=operation,
            error=str(exc),
            message=f"Shutdown broker because all log dirs in {', '.join(map(str, config.directories))} have failed",
            action="the broker halts (exit code 1) without acknowledging the failed write",
        )
        halt(EXIT_STORAGE_FAILED)

    return handle


def serve(config: BrokerConfig) -> int:
    configure_logging()
    dir_failure.set_handler(_halt_on_log_dir_failure(config))
    retain_freed_buffers()  # fetch responses are megabytes: reuse freed heap instead of faulting it in again
    return event_loop.run(run(config))
