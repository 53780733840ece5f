"""The asyncio ZooKeeper client: kazoo's API as coroutines.

    async with AsyncZkClient("127.0.0.1:7001,127.0.0.1:7002/kafka") as zk:
        await zk.ensure_path("/brokers/ids")
        await zk.create("/brokers/ids/1", b"{...}", ephemeral=True)
        data, stat = await zk.get("/controller", watch=on_change)

Method names, arguments and results are kazoo's (`create`, `get`, `set`,
`delete`, `exists`, `get_children`, `ensure_path`, `transaction`, `sync`,
`retry`, `add_listener`), plus ZooKeeper 3.6's `add_watch` / `remove_watches`
and `get_ephemerals` / `get_all_children_number`. Errors are the classes of
`client.zk.exceptions`.

Callbacks -- watchers (called with a `WatchedEvent`) and state listeners
(called with a `ZkState`) -- run one at a time, in the order the events
happened, on this client's loop (on its dispatch task, or right where the
event is read when no other callback is queued or running); a callback may be
a plain function or a coroutine function (awaited before the next callback
runs). A callback may await this client's methods. `ZkClient` replaces the
dispatch task with its callback thread (`callback_dispatcher`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from client.zk import codec
from client.zk.acl import ACL, check_acl_list
from client.zk.codec import Reply, WireRequest
from client.zk.connection import ZkSession
from client.zk.digest_md5 import DIGEST_MD5
from client.zk.ensemble_config import EnsembleConfig
from client.zk.ensemble_tracker import EnsembleTracker
from client.zk.exceptions import (
    InvalidACLError,
    NodeExistsError,
    NoNodeError,
    SystemZookeeperError,
    exception_for,
)
from client.zk.paths import CONFIG_PATH, Chroot, join, parse_hosts
from client.zk.retry import AsyncZkRetry
from client.zk.states import AddWatchMode, CreateMode, KeeperState, WatcherType, ZkState, ZnodeStat
from client.zk.transaction import (
    AsyncTransaction,
    CheckTxnOp,
    CreateTxnOp,
    DeleteTxnOp,
    SetDataTxnOp,
    TxnOp,
    check_value,
    check_version,
)
from client.zk.watches import Watcher, WatchTable
from runtime.tls import TlsConfig

log = logging.getLogger("zkraft.client.zk")

T = TypeVar("T")
CallbackDispatcher = Callable[[Callable[..., Any], tuple[Any, ...]], None]
Listener = Callable[[ZkState], Any]


def sasl_login(options: Mapping[str, str]) -> tuple[str, str]:
    """(username, password) from kazoo's sasl_options; ValueError naming what is wrong."""
    mechanism = str(options.get("mechanism", "")).upper()
    if mechanism != DIGEST_MD5:
        raise ValueError(f"sasl_options: mechanism {options.get('mechanism')!r} is not supported (only DIGEST-MD5)")
    unknown = set(options) - {"mechanism", "username", "password", "service"}
    if unknown:
        raise ValueError(f"sasl_options: unknown option(s) {', '.join(sorted(unknown))}")
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ValueError("sasl_options: DIGEST-MD5 needs a username and a password")
    return str(username), str(password)


class AsyncZkClient:
    """A ZooKeeper session over the zkraft quorum's gRPC session stream.

    `hosts`: "host:port,host:port[/chroot]" (or a list of "host:port").
    `timeout`: how long `start()` waits for a session, seconds.
    `session_timeout_ms`: the session timeout asked for; the server clamps it
    (`session_timeout_ms` property after start: the negotiated one).
    `linearizable_reads`: every read is a Raft ReadIndex read, not just
    sequentially consistent (docs/DESIGN.md §4.4).
    `command_retry`: the `retry()` policy, an `AsyncZkRetry` or its kwargs.
    `sasl_options`: kazoo's, `{"mechanism": "DIGEST-MD5", "username": ..., "password": ...}`: every
    connection logs in with SASL DIGEST-MD5 first (a JAAS Client section, as ZooKeeper's Java client).
    `default_acl`: the ACL of a create (or a transaction's create) given no `acl`, by path, as Kafka's
    KafkaZkClient passes ZkData.defaultAcls(path) with every create (None: world:anyone, ZooKeeper's own).
    `ensemble_tracker`: follow the quorum's membership (Curator's `ensembleTracker`, on by default as there):
    after each connection read /zookeeper/config, watch it, and reconnect only to the members it names
    (`client.zk.ensemble_tracker`), so the hosts given may since have left the quorum. Off: the hosts given.
    """

    def __init__(
        self,
        hosts: str | Sequence[str] = "127.0.0.1:2181",
        timeout: float = 10.0,
        session_timeout_ms: int = 10_000,
        linearizable_reads: bool = False,
        *,
        command_retry: AsyncZkRetry | dict[str, Any] | None = None,
        randomize_hosts: bool = True,
        callback_dispatcher: CallbackDispatcher | None = None,
        rng: random.Random | None = None,
        tls: TlsConfig | None = None,
        sasl_options: Mapping[str, str] | None = None,
        default_acl: Callable[[str], Sequence[ACL]] | None = None,
        ensemble_tracker: bool = True,
    ) -> None:
        addresses, chroot = parse_hosts(hosts)
        self._default_acl = default_acl
        sasl = sasl_login(sasl_options) if sasl_options is not None else None
        self.timeout = timeout
        self.chroot = chroot
        self._paths = Chroot(chroot)
        self._dispatcher = callback_dispatcher
        self._session = ZkSession(
            addresses, self._paths, session_timeout_ms, linearizable_reads, self._emit, randomize_hosts, rng, tls, sasl
        )
        self._ensemble = EnsembleTracker(self._session) if ensemble_tracker else None
        if isinstance(command_retry, AsyncZkRetry):
            self._retry = command_retry
        else:
            self._retry = AsyncZkRetry(**(command_retry or {}))
        # Unbounded on purpose: a callback may await this client, whose replies the reader delivers only
        # after queueing the events before them; a bounded queue could block the reader and deadlock.
        self._callbacks: asyncio.Queue[tuple[Callable[..., Any], tuple[Any, ...]] | None] | None = None
        self._dispatch_task: asyncio.Task[None] | None = None
        self._callback_running = False  # on the dispatch task, or in `_emit`

    # ---- lifecycle and state

    async def start(self, timeout: float | None = None) -> None:
        """Connect with a new session (no-op if running); ZkTimeoutError if no server accepts in time."""
        if self._dispatcher is None and (self._dispatch_task is None or self._dispatch_task.done()):
            self._callbacks = asyncio.Queue()
            self._dispatch_task = asyncio.create_task(self._dispatch_callbacks(self._callbacks), name="zk-callbacks")
        try:
            await self._session.start(self.timeout if timeout is None else timeout)
        except BaseException:
            await self._drain_callbacks()
            raise

    async def stop(self) -> None:
        """Close the session: its ephemeral nodes are deleted at once; state LOST, watchers get NONE."""
        await self._session.stop()
        await self._drain_callbacks()

    async def close(self) -> None:
        """Free the connections; stops first if needed. `start()` may be called again afterwards."""
        await self.stop()
        await self._session.close_channels()

    async def __aenter__(self) -> AsyncZkClient:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def state(self) -> ZkState:
        return self._session.state

    @property
    def client_state(self) -> KeeperState:
        return self._session.keeper_state

    @property
    def connected(self) -> bool:
        return self._session.state is ZkState.CONNECTED

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session, None before the first connection."""
        s = self._session
        return (s.session_id, s.password) if s.session_id else None

    @property
    def session_timeout_ms(self) -> int:
        """The negotiated session timeout (0 before the first connection)."""
        return self._session.negotiated_timeout_ms

    @property
    def last_zxid(self) -> int:
        """The newest zxid a reply of this session carried (ZooKeeper's lastZxidSeen)."""
        return self._session.last_zxid

    @property
    def server(self) -> str | None:
        """The server the session is connected to now."""
        return self._session.server

    @property
    def hosts(self) -> list[str]:
        """The servers a reconnect tries: those given, or the members /zookeeper/config names (ensemble_tracker)."""
        return list(self._session.hosts)

    @property
    def ensemble_config(self) -> EnsembleConfig | None:
        """The quorum's configuration followed last (Curator's getCurrentConfig); None before any or when off."""
        return self._ensemble.config if self._ensemble is not None else None

    def add_listener(self, listener: Listener) -> None:
        """`listener(state)` on every change of `ZkState` (CONNECTED / SUSPENDED / LOST)."""
        self._session.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._session.remove_listener(listener)

    # ---- reads

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        server_path = self._server_path(path)
        hook = _register_if_ok(self, WatchTable.DATA, server_path, _check_watch(watch))
        reply = await self._call(codec.get_data_request(server_path, watch is not None), path, hook)
        return codec.reply_data(reply), _stat(reply)

    async def get_config(self, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        """The quorum's dynamic configuration, /zookeeper/config, and its stat (ZooKeeper's getConfig: a getData
        of that path whatever the chroot); `watch` fires once when the configuration changes."""
        hook = _register_if_ok(self, WatchTable.DATA, CONFIG_PATH, _check_watch(watch))
        reply = await self._call(codec.get_data_request(CONFIG_PATH, watch is not None), CONFIG_PATH, hook)
        return codec.reply_data(reply), _stat(reply)

    async def reconfig(
        self, joining: str | None, leaving: str | None, new_members: str | None, from_config: int = -1
    ) -> tuple[bytes, ZnodeStat]:
        """Change the quorum's membership as kazoo's `reconfig` does: `joining` "server.4=host:port:port;client,...",
        `leaving` "3,5" (incremental), or `new_members` (the whole membership, one server apart from now);
        `from_config`: the version it must change from (-1: any). Returns the new configuration and its stat.
        Needs reconfigEnabled on the servers and WRITE on /zookeeper/config (a super user)."""
        for name, value in (("joining", joining), ("leaving", leaving), ("new_members", new_members)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
        if not isinstance(from_config, int):
            raise TypeError(f"from_config must be an int, not {type(from_config).__name__}")
        reply = await self._call(codec.reconfig_request(joining, leaving, new_members, from_config), CONFIG_PATH)
        return codec.reply_data(reply), _stat(reply)

    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        """The node's stat, or None; a watch is set even on a missing node (it fires CREATED)."""
        server_path = self._server_path(path)
        watcher = _check_watch(watch)

        def hook(reply: Reply) -> None:
            if watcher is None or reply.err not in (0, NoNodeError.code):
                return
            table = WatchTable.DATA if reply.err == 0 and codec.reply_exists(reply) else WatchTable.EXIST
            self._session.watches.add(table, server_path, watcher)

        try:
            reply = await self._call(codec.exists_request(server_path, watch is not None), path, hook)
        except NoNodeError:
            return None
        return _stat(reply) if codec.reply_exists(reply) else None

    async def get_children(
        self, path: str, watch: Watcher | None = None, include_data: bool = False
    ) -> list[str] | tuple[list[str], ZnodeStat]:
        """The children's names (sorted); with include_data=True, (children, the node's stat) as kazoo."""
        server_path = self._server_path(path)
        hook = _register_if_ok(self, WatchTable.CHILD, server_path, _check_watch(watch))
        request = codec.get_children_request(server_path, watch is not None, include_data)
        reply = await self._call(request, path, hook)
        children = codec.reply_children(reply)
        return (children, _stat(reply)) if include_data else children

    async def sync(self, path: str) -> str:
        """Make this server catch up with the leader before later reads (a Raft ReadIndex round)."""
        reply = await self._call(codec.sync_request(self._server_path(path)), path)
        return self._paths.to_client(codec.reply_path(reply)) if codec.reply_path(reply) else path

    async def get_ephemerals(self, prefix: str = "/") -> list[str]:
        """This session's ephemeral nodes whose paths start with `prefix`, sorted."""
        reply = await self._call(codec.get_ephemerals_request(self._server_path(prefix)), prefix)
        paths = [p for p in codec.reply_paths(reply) if self._paths.contains(p)]
        return sorted(self._paths.to_client(p) for p in paths)

    async def get_all_children_number(self, path: str) -> int:
        """How many nodes are below `path`, at any depth."""
        reply = await self._call(codec.get_all_children_number_request(self._server_path(path)), path)
        return codec.reply_number(reply)

    # ---- writes

    async def create(
        self,
        path: str,
        value: bytes = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
        container: bool = False,
        ttl_ms: int = 0,
    ) -> str | tuple[str, ZnodeStat]:
        """Create a node; returns its path (with the sequence suffix), or (path, stat) with include_data.

        `container`: a container node, which the leader deletes once it has had a child and has none
        (Curator's createContainers); `ttl_ms` > 0: a TTL node, deleted once unmodified and childless for
        that long (the server needs zookeeper.extendedTypesEnabled=true). `acl`: a list of
        `client.zk.acl.ACL` (None: world:anyone with every permission); with makepath, the missing
        parents get the same ACL, as kazoo's ensure_path(parent, acl)."""
        entries = _acl_argument(acl, path)
        if not entries and self._default_acl is not None:
            entries = tuple(self._default_acl(path))
        mode = CreateMode.of(ephemeral, sequence, container, ttl_ms)
        op = CreateTxnOp(self._server_path(path), check_value(value), mode, makepath, ttl_ms=ttl_ms, acl=entries)
        reply = await self._call(codec.create_request(op), path)
        created = self._paths.to_client(codec.reply_path(reply))
        return (created, _stat(reply)) if include_data else created

    async def ensure_path(self, path: str) -> bool:
        """Create `path` and its missing parents as persistent empty nodes, if missing."""
        if await self.exists(path) is not None:
            return True
        try:
            await self.create(path, makepath=True)
        except NodeExistsError:
            pass
        return True

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        """Set the data if the version matches (-1: any version); the new stat."""
        request = codec.set_data_request(self._server_path(path), check_value(value), check_version(version))
        return _stat(await self._call(request, path))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        """Delete the node if the version matches; recursive=True deletes its subtree first (version ignored)."""
        if recursive:
            await self._delete_recursive(path)
            return True
        await self._call(codec.delete_request(self._server_path(path), check_version(version)), path)
        return True

    async def _delete_recursive(self, path: str) -> None:
        # Depth first, as kazoo: children first, nodes that vanish meanwhile are fine.
        try:
            children = await self.get_children(path)
        except NoNodeError:
            return
        assert isinstance(children, list)
        for child in children:
            await self._delete_recursive(join(path, child))
        try:
            await self.delete(path)
        except NoNodeError:
            pass

    # ---- ACLs and authentication (ZooKeeper's getACL / setACL / addauth / whoAmI)

    async def get_acls(self, path: str) -> tuple[list[ACL], ZnodeStat]:
        """The node's ACL and stat; without ADMIN on it, digest ids come back as `user:x`."""
        reply = await self._call(codec.get_acl_request(self._server_path(path)), path)
        return codec.reply_acls(reply), _stat(reply)

    async def set_acls(self, path: str, acls: Sequence[ACL], version: int = -1) -> ZnodeStat:
        """Replace the node's ACL if its ACL version (`stat.aversion`) matches (-1: any); the new stat."""
        entries = _acl_argument(acls, path)
        request = codec.set_acl_request(self._server_path(path), entries, check_version(version))
        return _stat(await self._call(request, path))

    async def add_auth(self, scheme: str, credential: str | bytes) -> bool:
        """Authenticate this session (`"digest"`, `"user:password"`); re-sent on every reconnect.

        A refused one raises AuthFailedError, and the server ends the connection (the client
        reconnects without it), as ZooKeeper does."""
        auth = credential.encode() if isinstance(credential, str) else bytes(credential)
        session = self._session

        def remember(reply: Reply) -> None:  # at once, so a reconnect right after the reply re-sends it
            if reply.err == 0:
                session.remember_auth(scheme, auth)

        await self._call(codec.auth_request(scheme, auth), None, remember)
        return True

    async def whoami(self) -> list[tuple[str, str]]:
        """(scheme, user) of every id this session holds on its server (ZooKeeper 3.7 whoAmI)."""
        return codec.reply_client_infos(await self._call(codec.who_am_i_request(), None))

    def transaction(self) -> AsyncTransaction:
        """A kazoo-style transaction builder; `await t.commit()` returns one result per op."""
        return AsyncTransaction(self._commit_transaction)

    async def _commit_transaction(self, ops: Sequence[TxnOp]) -> list[Any]:
        if self._default_acl is not None:
            default = self._default_acl
            ops = [
                dataclasses.replace(op, acl=tuple(default(op.path)))
                if isinstance(op, CreateTxnOp) and not op.acl
                else op
                for op in ops
            ]
        server_ops = [_with_path(op, self._server_path(op.path)) for op in ops]
        reply = await self._call(codec.multi_request(server_ops), None)
        outcomes = codec.reply_op_outcomes(reply)
        if len(outcomes) != len(ops):
            raise SystemZookeeperError(f"the server answered a transaction of {len(ops)} ops with {len(outcomes)}")
        if any(outcome.err for outcome in outcomes):
            # Ops before the failing one report 0: they were rolled back (kazoo's RolledBackError).
            return [exception_for(outcome.err, path=op.path) for op, outcome in zip(ops, outcomes, strict=True)]
        results: list[Any] = []
        for op, outcome in zip(ops, outcomes, strict=True):
            if isinstance(op, CreateTxnOp):
                results.append(self._paths.to_client(outcome.path))
            elif isinstance(op, SetDataTxnOp):
                results.append(outcome.stat)
            else:
                results.append(True)
        return results

    # ---- persistent watches (ZooKeeper 3.6 addWatch / removeWatches)

    async def add_watch(self, path: str, watch: Watcher, mode: AddWatchMode = AddWatchMode.PERSISTENT) -> None:
        """A watch that stays after it fires; PERSISTENT_RECURSIVE covers the whole subtree (no CHILD events)."""
        mode = AddWatchMode(mode)
        server_path = self._server_path(path)
        table = WatchTable.PERSISTENT if mode is AddWatchMode.PERSISTENT else WatchTable.PERSISTENT_RECURSIVE
        hook = _register_if_ok(self, table, server_path, _check_watch(watch))
        await self._call(codec.add_watch_request(server_path, int(mode)), path, hook)

    async def remove_watches(self, path: str, watcher_type: WatcherType) -> None:
        """Remove this session's watches of `watcher_type` on `path`; NoWatcherError if there is none."""
        watcher_type = WatcherType(watcher_type)
        server_path = self._server_path(path)

        def hook(reply: Reply) -> None:
            if reply.err == 0:
                self._session.watches.remove(server_path, watcher_type)

        await self._call(codec.remove_watches_request(server_path, int(watcher_type)), path, hook)

    # ---- retry

    async def retry(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """`await zk.retry(zk.get, "/p")`: the call, retried on connection loss per `command_retry`."""
        return await self._retry.copy()(func, *args, **kwargs)

    # ---- internals

    def _server_path(self, path: str) -> str:
        return self._paths.to_server(path)

    async def _call(
        self, request: WireRequest, path: str | None, on_reply: Callable[[Reply], None] | None = None
    ) -> Reply:
        reply = await self._session.submit(request, on_reply)
        if reply.err:
            raise exception_for(reply.err, reply.message, path)
        return reply

    def _emit(self, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if self._dispatcher is not None:
            self._dispatcher(callback, args)
            return
        queue = self._callbacks
        if queue is None:
            return
        if self._callback_running or not queue.empty() or self._dispatch_task is None:
            queue.put_nowait((callback, args))
            return
        # Nothing queued or running: run it here, a task hop sooner than the dispatch
        # task would. The order holds: what is emitted meanwhile queues, and a coroutine
        # it returns is awaited by the dispatch task before anything queued after it.
        self._callback_running = True
        try:
            result = callback(*args)
        except Exception:  # the dispatch task's boundary: one failing callback must not stop the others
            log.exception("zk_callback_failed callback=%r", callback)
            result = None
        finally:
            self._callback_running = False
        if inspect.isawaitable(result):
            queue.put_nowait((_the_same, (result,)))

    async def _dispatch_callbacks(
        self, queue: asyncio.Queue[tuple[Callable[..., Any], tuple[Any, ...]] | None]
    ) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            callback, args = item
            self._callback_running = True
            try:
                result = callback(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # loop boundary: one failing callback must not stop the others
                log.exception("zk_callback_failed callback=%r", callback)
            finally:
                self._callback_running = False

    async def _drain_callbacks(self) -> None:
        """Deliver what stop() queued (LOST, NONE events), then end the dispatch task."""
        task, queue = self._dispatch_task, self._callbacks
        if task is None or queue is None or task.done():
            return
        queue.put_nowait(None)
        self._dispatch_task = None
        if asyncio.current_task() is not task:  # stop() called from a callback: the task ends by itself
            await task


def _the_same(awaitable: Awaitable[Any]) -> Awaitable[Any]:
    """A queue item for the dispatch task: await what a callback run by `_emit` returned."""
    return awaitable


def _acl_argument(acl: object, path: str) -> tuple[ACL, ...]:
    """The entries of an `acl` argument; an explicit empty list is refused as ZooKeeper refuses it."""
    entries = check_acl_list(acl, path)
    if acl is not None and not entries:
        raise InvalidACLError("an ACL list must not be empty", path)
    return entries


def _check_watch(watch: Watcher | None) -> Watcher | None:
    if watch is not None and not callable(watch):
        raise TypeError(f"watch must be callable, not {type(watch).__name__}")
    return watch


def _register_if_ok(
    client: AsyncZkClient, table: WatchTable, server_path: str, watcher: Watcher | None
) -> Callable[[Reply], None] | None:
    if watcher is None:
        return None

    def hook(reply: Reply) -> None:
        if reply.err == 0:
            client._session.watches.add(table, server_path, watcher)

    return hook


def _stat(reply: Reply) -> ZnodeStat:
    stat = codec.reply_stat(reply)
    if stat is None:
        raise SystemZookeeperError(f"the server's reply to request {reply.xid} has no stat")
    return stat


def _with_path(op: TxnOp, path: str) -> TxnOp:
    match op:
        case CreateTxnOp():
            return dataclasses.replace(op, path=path)
        case DeleteTxnOp():
            return DeleteTxnOp(path, op.version)
        case SetDataTxnOp():
            return SetDataTxnOp(path, op.data, op.version)
        case CheckTxnOp():
            return CheckTxnOp(path, op.version)
