"""An in-process fake of the ZooKeeper session service, for the client's unit tests.

Not zkemu: a small in-memory tree shared by a few fake "servers" (one gRPC
server each on 127.0.0.1) that follows the wire contract of
`proto/zkraft_proto/zk.proto` -- ordered replies, watch events queued before
the reply of the write that fired them, ZooKeeper's error codes, multi
results, SetWatches catch-up -- plus switches a test flips to make trouble:

* `server.available = False`: connects are refused with UNAVAILABLE;
* `server.lagging = True`: the server claims zxid 0, so it refuses a session
  that has seen anything (the "server behind the client" rule);
* `server.silent = True`: the server reads but neither answers nor pings back;
* `cluster.kill_connections(server)`: every stream of that server ends with UNAVAILABLE;
* `cluster.expire(session_id)`: the session expires (ephemerals deleted).

Everything runs on one asyncio loop in a background thread (the same loop the
sync client uses, see `client.zk.client._SharedLoop`), so a test drives it
from the main thread with `cluster.call(fn)`.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from client.zk.client import _SharedLoop
from zkraft_proto import zk_pb2, zk_pb2_grpc

T = TypeVar("T")

SILENCE_POLL_S = 0.01
SILENCE_ROUNDS_MAX = 6000  # a silent server holds a message back for at most a minute

OK = 0
RUNTIMEINCONSISTENCY = -2
BADARGUMENTS = -8
NONODE = -101
BADVERSION = -103
NOCHILDRENFOREPHEMERALS = -108
NODEEXISTS = -110
NOTEMPTY = -111
NOWATCHER = -121
CREATED, DELETED, CHANGED, CHILD = 1, 2, 3, 4
SYNC_CONNECTED = 3


class FakeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Node:
    data: bytes
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    pzxid: int = 0
    version: int = 0
    cversion: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> zk_pb2.Stat:
        return zk_pb2.Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            aversion=0,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
            pzxid=self.pzxid,
        )


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def validate(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise FakeError(BADARGUMENTS, f"invalid path {path!r}")


class Ensemble:
    """The replicated state every fake server shares: the tree, the sessions, the zxid."""

    def __init__(self) -> None:
        self.zxid = 0
        self.nodes: dict[str, Node] = {"/": Node(b"", 0, 0)}
        self.sessions: dict[int, int] = {}  # id -> timeout_ms
        self.connections: list[Connection] = []
        self._next_session = 0x1000

    @staticmethod
    def password(session_id: int) -> bytes:
        return hashlib.sha256(f"fake-{session_id}".encode()).digest()[:16]

    def new_session(self, timeout_ms: int) -> int:
        self._next_session += 1
        self.zxid += 1
        self.sessions[self._next_session] = timeout_ms
        return self._next_session

    # ---- watches
    def fire(self, event_type: int, path: str, zxid: int) -> None:
        for conn in list(self.connections):
            conn.fire(event_type, path, zxid)

    # ---- writes: each returns (result fields, [(event type, path)])
    def create(self, op: zk_pb2.CreateOp, owner: int, zxid: int, events: list[tuple[int, str]]) -> str:
        validate(op.path)
        if op.path == "/":
            raise FakeError(NODEEXISTS, "/ exists")
        parent_path = parent_of(op.path)
        if parent_path not in self.nodes:
            if not op.make_parents:
                raise FakeError(NONODE, f"no parent for {op.path}")
            self.create(zk_pb2.CreateOp(path=parent_path, make_parents=True), 0, zxid, events)
        parent = self.nodes[parent_path]
        if parent.ephemeral_owner:
            raise FakeError(NOCHILDRENFOREPHEMERALS, f"{parent_path} is ephemeral")
        path = op.path
        if op.mode in (2, 3):
            path = f"{op.path}{parent.cversion:010d}"
        if path in self.nodes:
            raise FakeError(NODEEXISTS, f"{path} exists")
        now = int(time.time() * 1000)
        owner = owner if op.mode in (1, 3) else 0
        self.nodes[path] = Node(op.data, zxid, now, owner, zxid, now, zxid)
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        events += [(CREATED, path), (CHILD, parent_path)]
        return path

    def delete(self, path: str, version: int, events: list[tuple[int, str]], zxid: int) -> None:
        validate(path)
        node = self.nodes.get(path)
        if node is None:
            raise FakeError(NONODE, f"no node {path}")
        if version != -1 and node.version != version:
            raise FakeError(BADVERSION, f"bad version for {path}")
        if node.children:
            raise FakeError(NOTEMPTY, f"{path} has children")
        del self.nodes[path]
        parent = self.nodes[parent_of(path)]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        events += [(DELETED, path), (CHILD, parent_of(path))]

    def set_data(self, path: str, data: bytes, version: int, events: list[tuple[int, str]], zxid: int) -> Node:
        validate(path)
        node = self.nodes.get(path)
        if node is None:
            raise FakeError(NONODE, f"no node {path}")
        if version != -1 and node.version != version:
            raise FakeError(BADVERSION, f"bad version for {path}")
        node.data, node.version, node.mzxid, node.mtime = data, node.version + 1, zxid, int(time.time() * 1000)
        events.append((CHANGED, path))
        return node

    def check(self, path: str, version: int) -> None:
        node = self.nodes.get(path)
        if node is None:
            raise FakeError(NONODE, f"no node {path}")
        if version != -1 and node.version != version:
            raise FakeError(BADVERSION, f"bad version for {path}")

    def close_session(self, session_id: int, closing: Connection | None = None) -> None:
        """Expire or close a session; its streams end (but `closing`, whose close reply is still to go)."""
        if self.sessions.pop(session_id, None) is None:
            return
        self.zxid += 1
        events: list[tuple[int, str]] = []
        owned = sorted((p for p, n in self.nodes.items() if n.ephemeral_owner == session_id), reverse=True)
        for path in owned:
            self.delete(path, -1, events, self.zxid)
        for event_type, path in events:
            self.fire(event_type, path, self.zxid)
        for conn in list(self.connections):
            if conn.session_id == session_id and conn is not closing:
                conn.end(None)


class Connection:
    """One session stream on one fake server; also the watcher the ensemble notifies."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.session_id = 0
        self.out: asyncio.Queue[zk_pb2.ServerMessage | tuple[grpc.StatusCode, str] | None] = asyncio.Queue()
        self.data: set[str] = set()
        self.child: set[str] = set()
        self.persistent: set[str] = set()
        self.recursive: set[str] = set()

    def send_event(self, event_type: int, path: str, zxid: int) -> None:
        event = zk_pb2.WatchEvent(type=event_type, state=SYNC_CONNECTED, path=path, zxid=zxid)
        self.out.put_nowait(zk_pb2.ServerMessage(event=event))

    def fire(self, event_type: int, path: str, zxid: int) -> None:
        fired = False
        if event_type in (CREATED, CHANGED, DELETED) and path in self.data:
            self.data.discard(path)
            fired = True
        if event_type in (DELETED, CHILD) and path in self.child:
            self.child.discard(path)
            fired = True
        if path in self.persistent:
            fired = True
        if event_type != CHILD:
            p = path
            while True:
                if p in self.recursive:
                    fired = True
                if p == "/":
                    break
                p = parent_of(p)
        if fired:
            self.send_event(event_type, path, zxid)

    def end(self, status: tuple[grpc.StatusCode, str] | None) -> None:
        self.out.put_nowait(status)


class FakeServer(zk_pb2_grpc.ZooKeeperServicer):
    def __init__(self, ensemble: Ensemble, server_id: int) -> None:
        self.ensemble = ensemble
        self.server_id = server_id
        self.available = True
        self.lagging = False
        self.silent = False
        self.corrupt_next_xid = False
        self.connects: list[zk_pb2.ConnectRequest] = []
        self.requests: list[zk_pb2.Request] = []
        self.connections: list[Connection] = []
        self.address = ""

    async def _hold_while_silent(self) -> None:
        """`silent` is a plain flag the tests flip from their own thread, so it is polled (bounded)."""
        for _ in range(SILENCE_ROUNDS_MAX):
            if not self.silent:
                return
            await asyncio.sleep(SILENCE_POLL_S)

    @property
    def applied_zxid(self) -> int:
        return 0 if self.lagging else self.ensemble.zxid

    async def Session(  # noqa: N802
        self, request_iterator: AsyncIterator[zk_pb2.ClientMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[zk_pb2.ServerMessage]:
        conn = Connection(self)
        reader = asyncio.get_running_loop().create_task(self._read(conn, request_iterator))
        try:
            while True:
                item = await conn.out.get()
                if item is None:
                    return
                if isinstance(item, tuple):
                    await context.abort(*item)
                    return
                await self._hold_while_silent()
                yield item
        finally:
            reader.cancel()
            if conn in self.ensemble.connections:
                self.ensemble.connections.remove(conn)
            if conn in self.connections:
                self.connections.remove(conn)

    async def _read(self, conn: Connection, requests: AsyncIterator[zk_pb2.ClientMessage]) -> None:
        first = await anext(requests)
        req = first.connect
        self.connects.append(req)
        if not self.available:
            conn.end((grpc.StatusCode.UNAVAILABLE, f"fake server {self.server_id} is unavailable"))
            return
        if req.session_id:
            if req.last_zxid_seen > self.applied_zxid:
                conn.end((grpc.StatusCode.UNAVAILABLE, "server is behind the client"))
                return
            known = req.session_id in self.ensemble.sessions
            if not known or req.password != self.ensemble.password(req.session_id):
                conn.out.put_nowait(zk_pb2.ServerMessage(connect=zk_pb2.ConnectResponse(password=bytes(16))))
                conn.end(None)
                return
            sid = req.session_id
        else:
            sid = self.ensemble.new_session(req.timeout_ms)
        conn.session_id = sid
        for other in list(self.ensemble.connections):  # the session moved: its older stream ends
            if other.session_id == sid:
                other.end((grpc.StatusCode.FAILED_PRECONDITION, "session moved"))
        self.ensemble.connections.append(conn)
        self.connections.append(conn)
        reply = zk_pb2.ConnectResponse(
            session_id=sid,
            password=self.ensemble.password(sid),
            timeout_ms=self.ensemble.sessions[sid],
            server_id=self.server_id,
            last_zxid=self.applied_zxid,
        )
        conn.out.put_nowait(zk_pb2.ServerMessage(connect=reply))
        async for msg in requests:
            await self._hold_while_silent()
            batch = msg.batch.requests if msg.WhichOneof("kind") == "batch" else [msg.request]
            for request in batch:
                self.requests.append(request)
                response = self._handle(conn, request)
                conn.out.put_nowait(zk_pb2.ServerMessage(response=response))
                if request.WhichOneof("op") == "close":
                    conn.end(None)
                    return

    def _handle(self, conn: Connection, request: zk_pb2.Request) -> zk_pb2.Response:
        op = request.WhichOneof("op")
        handler = getattr(self, f"_op_{op}")
        try:
            response: zk_pb2.Response = handler(conn, getattr(request, op))
        except FakeError as exc:
            response = zk_pb2.Response(err=exc.code, error_message=str(exc))
        response.xid = request.xid
        response.zxid = self.applied_zxid
        if self.corrupt_next_xid:
            self.corrupt_next_xid = False
            response.xid += 1000
        return response

    def _write(self, apply: Callable[[int, list[tuple[int, str]]], T]) -> T:
        ens = self.ensemble
        zxid = ens.zxid + 1
        events: list[tuple[int, str]] = []
        saved = copy.deepcopy(ens.nodes)
        try:
            result = apply(zxid, events)
        except FakeError:
            ens.nodes = saved
            ens.zxid = zxid  # a failed write still takes a zxid, as ZooKeeper's error txn
            raise
        ens.zxid = zxid
        for event_type, path in events:
            ens.fire(event_type, path, zxid)
        return result

    def _op_create(self, conn: Connection, op: zk_pb2.CreateOp) -> zk_pb2.Response:
        path = self._write(lambda zxid, events: self.ensemble.create(op, conn.session_id, zxid, events))
        return zk_pb2.Response(path=path, stat=self.ensemble.nodes[path].stat())

    def _op_delete(self, conn: Connection, op: zk_pb2.DeleteOp) -> zk_pb2.Response:
        self._write(lambda zxid, events: self.ensemble.delete(op.path, op.version, events, zxid))
        return zk_pb2.Response()

    def _op_set_data(self, conn: Connection, op: zk_pb2.SetDataOp) -> zk_pb2.Response:
        node = self._write(lambda zxid, events: self.ensemble.set_data(op.path, op.data, op.version, events, zxid))
        return zk_pb2.Response(stat=node.stat())

    def _op_check(self, conn: Connection, op: zk_pb2.CheckOp) -> zk_pb2.Response:
        self.ensemble.check(op.path, op.version)
        return zk_pb2.Response()

    def _op_multi(self, conn: Connection, multi: zk_pb2.MultiOp) -> zk_pb2.Response:
        ens = self.ensemble
        results: list[zk_pb2.OpResult] = []

        def apply(zxid: int, events: list[tuple[int, str]]) -> None:
            for i, op in enumerate(multi.ops):
                kind = op.WhichOneof("op")
                body = getattr(op, kind)
                try:
                    if kind == "create":
                        path = ens.create(body, conn.session_id, zxid, events)
                        results.append(zk_pb2.OpResult(path=path, stat=ens.nodes[path].stat()))
                    elif kind == "delete":
                        ens.delete(body.path, body.version, events, zxid)
                        results.append(zk_pb2.OpResult())
                    elif kind == "set_data":
                        node = ens.set_data(body.path, body.data, body.version, events, zxid)
                        results.append(zk_pb2.OpResult(stat=node.stat()))
                    else:
                        ens.check(body.path, body.version)
                        results.append(zk_pb2.OpResult())
                except FakeError as exc:
                    failed = [zk_pb2.OpResult(err=OK) for _ in range(i)]
                    failed.append(zk_pb2.OpResult(err=exc.code))
                    failed += [zk_pb2.OpResult(err=RUNTIMEINCONSISTENCY) for _ in range(len(multi.ops) - i - 1)]
                    results[:] = failed
                    raise

        try:
            self._write(apply)
        except FakeError as exc:
            return zk_pb2.Response(err=OK, results=results, error_message=f"multi failed: {exc}")
        return zk_pb2.Response(results=results)

    def _node(self, path: str) -> Node:
        validate(path)
        node = self.ensemble.nodes.get(path)
        if node is None:
            raise FakeError(NONODE, f"KeeperErrorCode = NoNode for {path}")
        return node

    def _op_get_data(self, conn: Connection, req: zk_pb2.GetDataRequest) -> zk_pb2.Response:
        node = self._node(req.path)
        if req.watch:
            conn.data.add(req.path)
        return zk_pb2.Response(data=node.data, stat=node.stat())

    def _op_exists(self, conn: Connection, req: zk_pb2.ExistsRequest) -> zk_pb2.Response:
        validate(req.path)
        if req.watch:
            conn.data.add(req.path)
        node = self.ensemble.nodes.get(req.path)
        if node is None:
            return zk_pb2.Response(exists=False)
        return zk_pb2.Response(exists=True, stat=node.stat())

    def _op_get_children(self, conn: Connection, req: zk_pb2.GetChildrenRequest) -> zk_pb2.Response:
        node = self._node(req.path)
        if req.watch:
            conn.child.add(req.path)
        response = zk_pb2.Response(children=sorted(node.children))
        if req.include_stat:
            response.stat.CopyFrom(node.stat())
        return response

    def _op_sync(self, conn: Connection, req: zk_pb2.SyncRequest) -> zk_pb2.Response:
        validate(req.path)
        return zk_pb2.Response(path=req.path)

    def _op_get_ephemerals(self, conn: Connection, req: zk_pb2.GetEphemeralsRequest) -> zk_pb2.Response:
        prefix = req.prefix_path or "/"
        paths = sorted(
            p for p, n in self.ensemble.nodes.items() if n.ephemeral_owner == conn.session_id and p.startswith(prefix)
        )
        return zk_pb2.Response(paths=paths)

    def _op_get_all_children_number(self, conn: Connection, req: zk_pb2.GetAllChildrenNumberRequest) -> zk_pb2.Response:
        self._node(req.path)
        prefix = req.path.rstrip("/") + "/"
        return zk_pb2.Response(number=sum(1 for p in self.ensemble.nodes if p.startswith(prefix)))

    def _op_add_watch(self, conn: Connection, req: zk_pb2.AddWatchRequest) -> zk_pb2.Response:
        validate(req.path)
        (conn.persistent if req.mode == 0 else conn.recursive).add(req.path)
        return zk_pb2.Response()

    def _op_remove_watches(self, conn: Connection, req: zk_pb2.RemoveWatchesRequest) -> zk_pb2.Response:
        tables = {1: [conn.child], 2: [conn.data], 3: [conn.child, conn.data, conn.persistent, conn.recursive],
                  4: [conn.persistent], 5: [conn.recursive]}[req.watcher_type]  # fmt: skip
        found = False
        for table in tables:
            if req.path in table:
                table.discard(req.path)
                found = True
        if not found:
            raise FakeError(NOWATCHER, f"KeeperErrorCode = NoWatcher for {req.path}")
        return zk_pb2.Response()

    def _op_set_watches(self, conn: Connection, req: zk_pb2.SetWatchesRequest) -> zk_pb2.Response:
        nodes, rel = self.ensemble.nodes, req.relative_zxid
        for path in req.data_watches:
            node = nodes.get(path)
            if node is None:
                conn.send_event(DELETED, path, -1)
            elif node.mzxid > rel:
                conn.send_event(CHANGED, path, -1)
            else:
                conn.data.add(path)
        for path in req.exist_watches:
            if path in nodes:
                conn.send_event(CREATED, path, -1)
            else:
                conn.data.add(path)
        for path in req.child_watches:
            node = nodes.get(path)
            if node is None:
                conn.send_event(DELETED, path, -1)
            elif node.pzxid > rel:
                conn.send_event(CHILD, path, -1)
            else:
                conn.child.add(path)
        conn.persistent.update(req.persistent_watches)
        conn.recursive.update(req.persistent_recursive_watches)
        return zk_pb2.Response()

    def _op_ping(self, conn: Connection, req: zk_pb2.PingRequest) -> zk_pb2.Response:
        return zk_pb2.Response()

    def _op_close(self, conn: Connection, req: zk_pb2.CloseRequest) -> zk_pb2.Response:
        self.ensemble.close_session(conn.session_id, closing=conn)
        return zk_pb2.Response()


class FakeCluster:
    """`n` fake servers over one Ensemble, on the shared client loop."""

    def __init__(self, n: int = 2) -> None:
        self.loop, _ = _SharedLoop.get()
        self.ensemble = Ensemble()
        self.servers = [FakeServer(self.ensemble, i + 1) for i in range(n)]
        self._grpc_servers: list[grpc.aio.Server] = []
        self.run(self._start())

    async def _start(self) -> None:
        for fake in self.servers:
            server = grpc.aio.server()
            zk_pb2_grpc.add_ZooKeeperServicer_to_server(fake, server)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            fake.address = f"127.0.0.1:{port}"
            self._grpc_servers.append(server)

    @property
    def hosts(self) -> str:
        return ",".join(s.address for s in self.servers)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def call(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def kill_connections(self, server: FakeServer) -> None:
        def kill() -> None:
            for conn in list(server.connections):
                conn.end((grpc.StatusCode.UNAVAILABLE, "killed by the test"))

        self.call(kill)

    def set_data(self, path: str, data: bytes) -> None:
        """A write by "another client", applied directly (fires the watches of live streams)."""
        ens = self.ensemble
        self.call(lambda: self.servers[0]._write(lambda zxid, ev: ens.set_data(path, data, -1, ev, zxid)))

    def create(self, path: str, data: bytes = b"") -> None:
        op = zk_pb2.CreateOp(path=path, data=data)
        self.call(lambda: self.servers[0]._write(lambda zxid, ev: self.ensemble.create(op, 0, zxid, ev)))

    def node(self, path: str) -> Node | None:
        return self.call(lambda: copy.deepcopy(self.ensemble.nodes.get(path)))

    def expire(self, session_id: int) -> None:
        self.call(lambda: self.ensemble.close_session(session_id))

    def server_of(self, address: str | None) -> FakeServer:
        return next(s for s in self.servers if s.address == address)

    def close(self) -> None:
        async def stop() -> None:
            for server in self._grpc_servers:
                await server.stop(grace=None)

        self.run(stop())
