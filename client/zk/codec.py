"""The protobuf edge of the ZooKeeper client: the one module that builds and reads `zk_pb2` messages.

Requests are built from full server paths (the chroot is applied by the
caller) and handed around as opaque `WireRequest`s; what comes back is
parsed into `ConnectReply`, `Reply` or `WireEvent`, and a `Reply`'s results
are read with the accessors below.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from client.zk.acl import ACL, Id
from client.zk.states import ZnodeStat
from client.zk.transaction import CheckTxnOp, CreateTxnOp, DeleteTxnOp, SetDataTxnOp, TxnOp
from zkraft_proto import zk_pb2

# What one request adds to a stream message beyond its bytes as submitted: its field tag and length
# (5 bytes at most under 2 MiB) and the xid the connection sets (11 at most).
BATCH_FRAMING_BYTES = 16

WireRequest: TypeAlias = zk_pb2.Request
ClientMessage: TypeAlias = zk_pb2.ClientMessage
ServerMessage: TypeAlias = zk_pb2.ServerMessage


@dataclass(frozen=True, slots=True)
class ConnectReply:
    session_id: int
    password: bytes
    timeout_ms: int
    server_id: int
    last_zxid: int

    @property
    def expired(self) -> bool:
        """The server does not know the session (expired, closed, bad password): ZooKeeper's timeOut <= 0."""
        return self.timeout_ms <= 0


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: quorum/raft/types.py says why
class Reply:
    xid: int
    zxid: int
    err: int
    message: str
    raw: zk_pb2.Response


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: quorum/raft/types.py says why
class WireEvent:
    type: int
    state: int
    path: str
    zxid: int


@dataclass(frozen=True, slots=True)
class OpOutcome:
    """One op's result inside a multi reply."""

    err: int
    path: str
    stat: ZnodeStat | None


class ProtocolError(Exception):
    """The server sent something the protocol does not allow; the connection is dropped."""


# ---- stream framing


def connect_message(
    session_id: int, password: bytes, timeout_ms: int, last_zxid_seen: int, linearizable_reads: bool
) -> ClientMessage:
    return zk_pb2.ClientMessage(
        connect=zk_pb2.ConnectRequest(
            session_id=session_id,
            password=password,
            timeout_ms=timeout_ms,
            last_zxid_seen=last_zxid_seen,
            linearizable_reads=linearizable_reads,
        )
    )


def request_message(xid: int, request: WireRequest) -> ClientMessage:
    request.xid = xid
    return zk_pb2.ClientMessage(request=request)


def requests_message(requests: Sequence[WireRequest]) -> ClientMessage:
    """One request as itself; several as one batch message."""
    if len(requests) == 1:
        return zk_pb2.ClientMessage(request=requests[0])
    return zk_pb2.ClientMessage(batch=zk_pb2.RequestBatch(requests=requests))


def unbatch(msg: ServerMessage) -> Sequence[ServerMessage]:
    if msg.WhichOneof("kind") == "batch":
        return msg.batch.messages
    return (msg,)


def parse_server_message(msg: ServerMessage) -> ConnectReply | Reply | WireEvent:
    kind = msg.WhichOneof("kind")
    if kind == "response":
        r = msg.response
        return Reply(xid=r.xid, zxid=r.zxid, err=r.err, message=r.error_message, raw=r)
    if kind == "event":
        e = msg.event
        return WireEvent(type=e.type, state=e.state, path=e.path, zxid=e.zxid)
    if kind == "connect":
        c = msg.connect
        return ConnectReply(
            session_id=c.session_id,
            password=bytes(c.password),
            timeout_ms=c.timeout_ms,
            server_id=c.server_id,
            last_zxid=c.last_zxid,
        )
    raise ProtocolError(f"server message of unknown kind {kind!r}")


def op_name(request: WireRequest) -> str:
    return request.WhichOneof("op") or "unknown"


def request_path(request: WireRequest) -> str | None:
    """The path a request is about, for error messages (None for ping, close, multi, set_watches)."""
    op = request.WhichOneof("op")
    if op is None:
        return None
    body = getattr(request, op)
    if op == "get_ephemerals":
        return body.prefix_path or "/"
    return getattr(body, "path", None)


# ---- requests


def _acl_pb(entries: Sequence[ACL]) -> list[zk_pb2.Acl]:
    return [zk_pb2.Acl(perms=a.perms, id=zk_pb2.Id(scheme=a.id.scheme, id=a.id.id)) for a in entries]


def _create_op(op: CreateTxnOp) -> zk_pb2.CreateOp:
    return zk_pb2.CreateOp(
        path=op.path,
        data=op.data,
        mode=int(op.mode),
        make_parents=op.make_parents,
        ttl_ms=op.ttl_ms,
        acl=_acl_pb(op.acl),
    )


def set_acl_request(path: str, acl: Sequence[ACL], version: int) -> WireRequest:
    return zk_pb2.Request(set_acl=zk_pb2.SetAclOp(path=path, acl=_acl_pb(acl), version=version))


def get_acl_request(path: str) -> WireRequest:
    return zk_pb2.Request(get_acl=zk_pb2.GetAclRequest(path=path))


def auth_request(scheme: str, credential: bytes) -> WireRequest:
    return zk_pb2.Request(auth=zk_pb2.AuthRequest(scheme=scheme, auth=credential))


def sasl_request(token: bytes) -> WireRequest:
    return zk_pb2.Request(sasl=zk_pb2.SaslRequest(token=token))


def sasl_token(reply: Reply) -> bytes | None:
    """The server's next SASL token (None: a null token, from a server without SASL)."""
    return reply.raw.sasl_token if reply.raw.HasField("sasl_token") else None


def who_am_i_request() -> WireRequest:
    return zk_pb2.Request(who_am_i=zk_pb2.WhoAmIRequest())


def create_request(op: CreateTxnOp) -> WireRequest:
    return zk_pb2.Request(create=_create_op(op))


def delete_request(path: str, version: int) -> WireRequest:
    return zk_pb2.Request(delete=zk_pb2.DeleteOp(path=path, version=version))


def set_data_request(path: str, data: bytes, version: int) -> WireRequest:
    return zk_pb2.Request(set_data=zk_pb2.SetDataOp(path=path, data=data, version=version))


def _op(op: TxnOp) -> zk_pb2.Op:
    match op:
        case CreateTxnOp():
            return zk_pb2.Op(create=_create_op(op))
        case DeleteTxnOp(path=path, version=version):
            return zk_pb2.Op(delete=zk_pb2.DeleteOp(path=path, version=version))
        case SetDataTxnOp(path=path, data=data, version=version):
            return zk_pb2.Op(set_data=zk_pb2.SetDataOp(path=path, data=data, version=version))
        case CheckTxnOp(path=path, version=version):
            return zk_pb2.Op(check=zk_pb2.CheckOp(path=path, version=version))
    raise TypeError(f"not a transaction op: {op!r}")


def multi_request(ops: Sequence[TxnOp]) -> WireRequest:
    return zk_pb2.Request(multi=zk_pb2.MultiOp(ops=[_op(op) for op in ops]))


def get_data_request(path: str, watch: bool) -> WireRequest:
    return zk_pb2.Request(get_data=zk_pb2.GetDataRequest(path=path, watch=watch))


def reconfig_request(
    joining: str | None, leaving: str | None, new_members: str | None, from_config: int
) -> WireRequest:
    """ZooKeeper's ReconfigRequest; None stays unset (jute's null: an incremental reconfig has no newMembers)."""
    fields = {"joining_servers": joining, "leaving_servers": leaving, "new_members": new_members}
    body = zk_pb2.ReconfigRequest(cur_config_id=from_config, **{k: v for k, v in fields.items() if v is not None})
    return zk_pb2.Request(reconfig=body)


def exists_request(path: str, watch: bool) -> WireRequest:
    return zk_pb2.Request(exists=zk_pb2.ExistsRequest(path=path, watch=watch))


def get_children_request(path: str, watch: bool, include_stat: bool) -> WireRequest:
    return zk_pb2.Request(get_children=zk_pb2.GetChildrenRequest(path=path, watch=watch, include_stat=include_stat))


def sync_request(path: str) -> WireRequest:
    return zk_pb2.Request(sync=zk_pb2.SyncRequest(path=path))


def get_ephemerals_request(prefix: str) -> WireRequest:
    return zk_pb2.Request(get_ephemerals=zk_pb2.GetEphemeralsRequest(prefix_path=prefix))


def get_all_children_number_request(path: str) -> WireRequest:
    return zk_pb2.Request(get_all_children_number=zk_pb2.GetAllChildrenNumberRequest(path=path))


def add_watch_request(path: str, mode: int) -> WireRequest:
    return zk_pb2.Request(add_watch=zk_pb2.AddWatchRequest(path=path, mode=mode))


def remove_watches_request(path: str, watcher_type: int) -> WireRequest:
    return zk_pb2.Request(remove_watches=zk_pb2.RemoveWatchesRequest(path=path, watcher_type=watcher_type))


def set_watches_request(
    relative_zxid: int,
    data: Iterable[str] = (),
    exist: Iterable[str] = (),
    child: Iterable[str] = (),
    persistent: Iterable[str] = (),
    persistent_recursive: Iterable[str] = (),
) -> WireRequest:
    return zk_pb2.Request(
        set_watches=zk_pb2.SetWatchesRequest(
            relative_zxid=relative_zxid,
            data_watches=list(data),
            exist_watches=list(exist),
            child_watches=list(child),
            persistent_watches=list(persistent),
            persistent_recursive_watches=list(persistent_recursive),
        )
    )


def ping_request() -> WireRequest:
    return zk_pb2.Request(ping=zk_pb2.PingRequest())


def close_request() -> WireRequest:
    return zk_pb2.Request(close=zk_pb2.CloseRequest())


# ---- reply accessors


def stat_of(stat: zk_pb2.Stat) -> ZnodeStat:
    return ZnodeStat(
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        ctime=stat.ctime,
        mtime=stat.mtime,
        version=stat.version,
        cversion=stat.cversion,
        aversion=stat.aversion,
        ephemeralOwner=stat.ephemeral_owner,
        dataLength=stat.data_length,
        numChildren=stat.num_children,
        pzxid=stat.pzxid,
    )


def reply_stat(reply: Reply) -> ZnodeStat | None:
    return stat_of(reply.raw.stat) if reply.raw.HasField("stat") else None


def reply_path(reply: Reply) -> str:
    return reply.raw.path


def reply_data(reply: Reply) -> bytes:
    return bytes(reply.raw.data)


def reply_exists(reply: Reply) -> bool:
    return reply.raw.exists


def reply_children(reply: Reply) -> list[str]:
    return list(reply.raw.children)


def reply_paths(reply: Reply) -> list[str]:
    return list(reply.raw.paths)


def reply_acls(reply: Reply) -> list[ACL]:
    return [ACL(a.perms, Id(a.id.scheme, a.id.id)) for a in reply.raw.acls]


def reply_client_infos(reply: Reply) -> list[tuple[str, str]]:
    """whoAmI: (auth scheme, user) per id the session holds."""
    return [(c.auth_scheme, c.user) for c in reply.raw.client_infos]


def reply_number(reply: Reply) -> int:
    return reply.raw.number


def reply_op_outcomes(reply: Reply) -> list[OpOutcome]:
    return [
        OpOutcome(err=r.err, path=r.path, stat=stat_of(r.stat) if r.HasField("stat") else None)
        for r in reply.raw.results
    ]
