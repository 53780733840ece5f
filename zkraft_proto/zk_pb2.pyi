from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Stat(_message.Message):
    __slots__ = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeral_owner", "data_length", "num_children", "pzxid")
    CZXID_FIELD_NUMBER: _ClassVar[int]
    MZXID_FIELD_NUMBER: _ClassVar[int]
    CTIME_FIELD_NUMBER: _ClassVar[int]
    MTIME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CVERSION_FIELD_NUMBER: _ClassVar[int]
    AVERSION_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_OWNER_FIELD_NUMBER: _ClassVar[int]
    DATA_LENGTH_FIELD_NUMBER: _ClassVar[int]
    NUM_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    PZXID_FIELD_NUMBER: _ClassVar[int]
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int
    def __init__(self, czxid: _Optional[int] = ..., mzxid: _Optional[int] = ..., ctime: _Optional[int] = ..., mtime: _Optional[int] = ..., version: _Optional[int] = ..., cversion: _Optional[int] = ..., aversion: _Optional[int] = ..., ephemeral_owner: _Optional[int] = ..., data_length: _Optional[int] = ..., num_children: _Optional[int] = ..., pzxid: _Optional[int] = ...) -> None: ...

class Id(_message.Message):
    __slots__ = ("scheme", "id")
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    scheme: str
    id: str
    def __init__(self, scheme: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class Acl(_message.Message):
    __slots__ = ("perms", "id")
    PERMS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    perms: int
    id: Id
    def __init__(self, perms: _Optional[int] = ..., id: _Optional[_Union[Id, _Mapping]] = ...) -> None: ...

class CreateOp(_message.Message):
    __slots__ = ("path", "data", "mode", "make_parents", "acl", "ttl_ms", "null_data")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MAKE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    NULL_DATA_FIELD_NUMBER: _ClassVar[int]
    path: str
    data: bytes
    mode: int
    make_parents: bool
    acl: _containers.RepeatedCompositeFieldContainer[Acl]
    ttl_ms: int
    null_data: bool
    def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ..., mode: _Optional[int] = ..., make_parents: _Optional[bool] = ..., acl: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ..., ttl_ms: _Optional[int] = ..., null_data: _Optional[bool] = ...) -> None: ...

class DeleteOp(_message.Message):
    __slots__ = ("path", "version")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    version: int
    def __init__(self, path: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class SetDataOp(_message.Message):
    __slots__ = ("path", "data", "version", "null_data")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NULL_DATA_FIELD_NUMBER: _ClassVar[int]
    path: str
    data: bytes
    version: int
    null_data: bool
    def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ..., version: _Optional[int] = ..., null_data: _Optional[bool] = ...) -> None: ...

class CheckOp(_message.Message):
    __slots__ = ("path", "version")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    version: int
    def __init__(self, path: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class SetAclOp(_message.Message):
    __slots__ = ("path", "acl", "version")
    PATH_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    path: str
    acl: _containers.RepeatedCompositeFieldContainer[Acl]
    version: int
    def __init__(self, path: _Optional[str] = ..., acl: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class Op(_message.Message):
    __slots__ = ("create", "delete", "set_data", "check")
    CREATE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SET_DATA_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    create: CreateOp
    delete: DeleteOp
    set_data: SetDataOp
    check: CheckOp
    def __init__(self, create: _Optional[_Union[CreateOp, _Mapping]] = ..., delete: _Optional[_Union[DeleteOp, _Mapping]] = ..., set_data: _Optional[_Union[SetDataOp, _Mapping]] = ..., check: _Optional[_Union[CheckOp, _Mapping]] = ...) -> None: ...

class MultiOp(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    def __init__(self, ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ...) -> None: ...

class CreateSessionTxn(_message.Message):
    __slots__ = ("session_id", "timeout_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    timeout_ms: int
    def __init__(self, session_id: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CloseSessionTxn(_message.Message):
    __slots__ = ("session_id", "expired")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    expired: bool
    def __init__(self, session_id: _Optional[int] = ..., expired: _Optional[bool] = ...) -> None: ...

class AttachSessionTxn(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class MemberClientTxn(_message.Message):
    __slots__ = ("server_id", "client_address", "base_config")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    BASE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    client_address: str
    base_config: str
    def __init__(self, server_id: _Optional[int] = ..., client_address: _Optional[str] = ..., base_config: _Optional[str] = ...) -> None: ...

class DeleteContainerTxn(_message.Message):
    __slots__ = ("path", "never_used_ms")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NEVER_USED_MS_FIELD_NUMBER: _ClassVar[int]
    path: str
    never_used_ms: int
    def __init__(self, path: _Optional[str] = ..., never_used_ms: _Optional[int] = ...) -> None: ...

class Txn(_message.Message):
    __slots__ = ("time_ms", "session_id", "auth", "forward_tag", "connection", "create_session", "close_session", "create", "delete", "set_data", "check", "multi", "set_acl", "delete_container", "attach_session", "member_client")
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    FORWARD_TAG_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_SESSION_FIELD_NUMBER: _ClassVar[int]
    CLOSE_SESSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SET_DATA_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    MULTI_FIELD_NUMBER: _ClassVar[int]
    SET_ACL_FIELD_NUMBER: _ClassVar[int]
    DELETE_CONTAINER_FIELD_NUMBER: _ClassVar[int]
    ATTACH_SESSION_FIELD_NUMBER: _ClassVar[int]
    MEMBER_CLIENT_FIELD_NUMBER: _ClassVar[int]
    time_ms: int
    session_id: int
    auth: _containers.RepeatedCompositeFieldContainer[Id]
    forward_tag: int
    connection: int
    create_session: CreateSessionTxn
    close_session: CloseSessionTxn
    create: CreateOp
    delete: DeleteOp
    set_data: SetDataOp
    check: CheckOp
    multi: MultiOp
    set_acl: SetAclOp
    delete_container: DeleteContainerTxn
    attach_session: AttachSessionTxn
    member_client: MemberClientTxn
    def __init__(self, time_ms: _Optional[int] = ..., session_id: _Optional[int] = ..., auth: _Optional[_Iterable[_Union[Id, _Mapping]]] = ..., forward_tag: _Optional[int] = ..., connection: _Optional[int] = ..., create_session: _Optional[_Union[CreateSessionTxn, _Mapping]] = ..., close_session: _Optional[_Union[CloseSessionTxn, _Mapping]] = ..., create: _Optional[_Union[CreateOp, _Mapping]] = ..., delete: _Optional[_Union[DeleteOp, _Mapping]] = ..., set_data: _Optional[_Union[SetDataOp, _Mapping]] = ..., check: _Optional[_Union[CheckOp, _Mapping]] = ..., multi: _Optional[_Union[MultiOp, _Mapping]] = ..., set_acl: _Optional[_Union[SetAclOp, _Mapping]] = ..., delete_container: _Optional[_Union[DeleteContainerTxn, _Mapping]] = ..., attach_session: _Optional[_Union[AttachSessionTxn, _Mapping]] = ..., member_client: _Optional[_Union[MemberClientTxn, _Mapping]] = ...) -> None: ...

class OpResult(_message.Message):
    __slots__ = ("err", "path", "stat", "data", "children", "null_data")
    ERR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    NULL_DATA_FIELD_NUMBER: _ClassVar[int]
    err: int
    path: str
    stat: Stat
    data: bytes
    children: _containers.RepeatedScalarFieldContainer[str]
    null_data: bool
    def __init__(self, err: _Optional[int] = ..., path: _Optional[str] = ..., stat: _Optional[_Union[Stat, _Mapping]] = ..., data: _Optional[bytes] = ..., children: _Optional[_Iterable[str]] = ..., null_data: _Optional[bool] = ...) -> None: ...

class TxnResult(_message.Message):
    __slots__ = ("err", "path", "stat", "results")
    ERR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STAT_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    err: int
    path: str
    stat: Stat
    results: _containers.RepeatedCompositeFieldContainer[OpResult]
    def __init__(self, err: _Optional[int] = ..., path: _Optional[str] = ..., stat: _Optional[_Union[Stat, _Mapping]] = ..., results: _Optional[_Iterable[_Union[OpResult, _Mapping]]] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("session_id", "password", "timeout_ms", "last_zxid_seen", "linearizable_reads")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ZXID_SEEN_FIELD_NUMBER: _ClassVar[int]
    LINEARIZABLE_READS_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    password: bytes
    timeout_ms: int
    last_zxid_seen: int
    linearizable_reads: bool
    def __init__(self, session_id: _Optional[int] = ..., password: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., last_zxid_seen: _Optional[int] = ..., linearizable_reads: _Optional[bool] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("session_id", "password", "timeout_ms", "server_id", "last_zxid")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ZXID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    password: bytes
    timeout_ms: int
    server_id: int
    last_zxid: int
    def __init__(self, session_id: _Optional[int] = ..., password: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., server_id: _Optional[int] = ..., last_zxid: _Optional[int] = ...) -> None: ...

class GetDataRequest(_message.Message):
    __slots__ = ("path", "watch")
    PATH_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    path: str
    watch: bool
    def __init__(self, path: _Optional[str] = ..., watch: _Optional[bool] = ...) -> None: ...

class ExistsRequest(_message.Message):
    __slots__ = ("path", "watch")
    PATH_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    path: str
    watch: bool
    def __init__(self, path: _Optional[str] = ..., watch: _Optional[bool] = ...) -> None: ...

class GetChildrenRequest(_message.Message):
    __slots__ = ("path", "watch", "include_stat")
    PATH_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STAT_FIELD_NUMBER: _ClassVar[int]
    path: str
    watch: bool
    include_stat: bool
    def __init__(self, path: _Optional[str] = ..., watch: _Optional[bool] = ..., include_stat: _Optional[bool] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class GetEphemeralsRequest(_message.Message):
    __slots__ = ("prefix_path",)
    PREFIX_PATH_FIELD_NUMBER: _ClassVar[int]
    prefix_path: str
    def __init__(self, prefix_path: _Optional[str] = ...) -> None: ...

class GetAllChildrenNumberRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class AddWatchRequest(_message.Message):
    __slots__ = ("path", "mode")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    path: str
    mode: int
    def __init__(self, path: _Optional[str] = ..., mode: _Optional[int] = ...) -> None: ...

class RemoveWatchesRequest(_message.Message):
    __slots__ = ("path", "watcher_type")
    PATH_FIELD_NUMBER: _ClassVar[int]
    WATCHER_TYPE_FIELD_NUMBER: _ClassVar[int]
    path: str
    watcher_type: int
    def __init__(self, path: _Optional[str] = ..., watcher_type: _Optional[int] = ...) -> None: ...

class SetWatchesRequest(_message.Message):
    __slots__ = ("relative_zxid", "data_watches", "exist_watches", "child_watches", "persistent_watches", "persistent_recursive_watches")
    RELATIVE_ZXID_FIELD_NUMBER: _ClassVar[int]
    DATA_WATCHES_FIELD_NUMBER: _ClassVar[int]
    EXIST_WATCHES_FIELD_NUMBER: _ClassVar[int]
    CHILD_WATCHES_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_WATCHES_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_RECURSIVE_WATCHES_FIELD_NUMBER: _ClassVar[int]
    relative_zxid: int
    data_watches: _containers.RepeatedScalarFieldContainer[str]
    exist_watches: _containers.RepeatedScalarFieldContainer[str]
    child_watches: _containers.RepeatedScalarFieldContainer[str]
    persistent_watches: _containers.RepeatedScalarFieldContainer[str]
    persistent_recursive_watches: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, relative_zxid: _Optional[int] = ..., data_watches: _Optional[_Iterable[str]] = ..., exist_watches: _Optional[_Iterable[str]] = ..., child_watches: _Optional[_Iterable[str]] = ..., persistent_watches: _Optional[_Iterable[str]] = ..., persistent_recursive_watches: _Optional[_Iterable[str]] = ...) -> None: ...

class ReconfigRequest(_message.Message):
    __slots__ = ("joining_servers", "leaving_servers", "new_members", "cur_config_id")
    JOINING_SERVERS_FIELD_NUMBER: _ClassVar[int]
    LEAVING_SERVERS_FIELD_NUMBER: _ClassVar[int]
    NEW_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CUR_CONFIG_ID_FIELD_NUMBER: _ClassVar[int]
    joining_servers: str
    leaving_servers: str
    new_members: str
    cur_config_id: int
    def __init__(self, joining_servers: _Optional[str] = ..., leaving_servers: _Optional[str] = ..., new_members: _Optional[str] = ..., cur_config_id: _Optional[int] = ...) -> None: ...

class CheckWatchesRequest(_message.Message):
    __slots__ = ("path", "watcher_type")
    PATH_FIELD_NUMBER: _ClassVar[int]
    WATCHER_TYPE_FIELD_NUMBER: _ClassVar[int]
    path: str
    watcher_type: int
    def __init__(self, path: _Optional[str] = ..., watcher_type: _Optional[int] = ...) -> None: ...

class GetAclRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class AuthRequest(_message.Message):
    __slots__ = ("scheme", "auth")
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    scheme: str
    auth: bytes
    def __init__(self, scheme: _Optional[str] = ..., auth: _Optional[bytes] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SaslRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    def __init__(self, token: _Optional[bytes] = ...) -> None: ...

class ReadOp(_message.Message):
    __slots__ = ("get_data", "get_children")
    GET_DATA_FIELD_NUMBER: _ClassVar[int]
    GET_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    get_data: GetDataRequest
    get_children: GetChildrenRequest
    def __init__(self, get_data: _Optional[_Union[GetDataRequest, _Mapping]] = ..., get_children: _Optional[_Union[GetChildrenRequest, _Mapping]] = ...) -> None: ...

class MultiReadRequest(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[ReadOp]
    def __init__(self, ops: _Optional[_Iterable[_Union[ReadOp, _Mapping]]] = ...) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Request(_message.Message):
    __slots__ = ("xid", "create", "delete", "set_data", "check", "multi", "get_data", "exists", "get_children", "sync", "get_ephemerals", "get_all_children_number", "add_watch", "remove_watches", "set_watches", "ping", "close", "set_acl", "get_acl", "auth", "who_am_i", "multi_read", "sasl", "check_watches", "reconfig")
    XID_FIELD_NUMBER: _ClassVar[int]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SET_DATA_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    MULTI_FIELD_NUMBER: _ClassVar[int]
    GET_DATA_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    GET_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    GET_EPHEMERALS_FIELD_NUMBER: _ClassVar[int]
    GET_ALL_CHILDREN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ADD_WATCH_FIELD_NUMBER: _ClassVar[int]
    REMOVE_WATCHES_FIELD_NUMBER: _ClassVar[int]
    SET_WATCHES_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    SET_ACL_FIELD_NUMBER: _ClassVar[int]
    GET_ACL_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    WHO_AM_I_FIELD_NUMBER: _ClassVar[int]
    MULTI_READ_FIELD_NUMBER: _ClassVar[int]
    SASL_FIELD_NUMBER: _ClassVar[int]
    CHECK_WATCHES_FIELD_NUMBER: _ClassVar[int]
    RECONFIG_FIELD_NUMBER: _ClassVar[int]
    xid: int
    create: CreateOp
    delete: DeleteOp
    set_data: SetDataOp
    check: CheckOp
    multi: MultiOp
    get_data: GetDataRequest
    exists: ExistsRequest
    get_children: GetChildrenRequest
    sync: SyncRequest
    get_ephemerals: GetEphemeralsRequest
    get_all_children_number: GetAllChildrenNumberRequest
    add_watch: AddWatchRequest
    remove_watches: RemoveWatchesRequest
    set_watches: SetWatchesRequest
    ping: PingRequest
    close: CloseRequest
    set_acl: SetAclOp
    get_acl: GetAclRequest
    auth: AuthRequest
    who_am_i: WhoAmIRequest
    multi_read: MultiReadRequest
    sasl: SaslRequest
    check_watches: CheckWatchesRequest
    reconfig: ReconfigRequest
    def __init__(self, xid: _Optional[int] = ..., create: _Optional[_Union[CreateOp, _Mapping]] = ..., delete: _Optional[_Union[DeleteOp, _Mapping]] = ..., set_data: _Optional[_Union[SetDataOp, _Mapping]] = ..., check: _Optional[_Union[CheckOp, _Mapping]] = ..., multi: _Optional[_Union[MultiOp, _Mapping]] = ..., get_data: _Optional[_Union[GetDataRequest, _Mapping]] = ..., exists: _Optional[_Union[ExistsRequest, _Mapping]] = ..., get_children: _Optional[_Union[GetChildrenRequest, _Mapping]] = ..., sync: _Optional[_Union[SyncRequest, _Mapping]] = ..., get_ephemerals: _Optional[_Union[GetEphemeralsRequest, _Mapping]] = ..., get_all_children_number: _Optional[_Union[GetAllChildrenNumberRequest, _Mapping]] = ..., add_watch: _Optional[_Union[AddWatchRequest, _Mapping]] = ..., remove_watches: _Optional[_Union[RemoveWatchesRequest, _Mapping]] = ..., set_watches: _Optional[_Union[SetWatchesRequest, _Mapping]] = ..., ping: _Optional[_Union[PingRequest, _Mapping]] = ..., close: _Optional[_Union[CloseRequest, _Mapping]] = ..., set_acl: _Optional[_Union[SetAclOp, _Mapping]] = ..., get_acl: _Optional[_Union[GetAclRequest, _Mapping]] = ..., auth: _Optional[_Union[AuthRequest, _Mapping]] = ..., who_am_i: _Optional[_Union[WhoAmIRequest, _Mapping]] = ..., multi_read: _Optional[_Union[MultiReadRequest, _Mapping]] = ..., sasl: _Optional[_Union[SaslRequest, _Mapping]] = ..., check_watches: _Optional[_Union[CheckWatchesRequest, _Mapping]] = ..., reconfig: _Optional[_Union[ReconfigRequest, _Mapping]] = ...) -> None: ...

class Response(_message.Message):
    __slots__ = ("xid", "zxid", "err", "error_message", "path", "stat", "data", "children", "results", "paths", "number", "exists", "acls", "client_infos", "sasl_token", "null_data")
    XID_FIELD_NUMBER: _ClassVar[int]
    ZXID_FIELD_NUMBER: _ClassVar[int]
    ERR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_INFOS_FIELD_NUMBER: _ClassVar[int]
    SASL_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NULL_DATA_FIELD_NUMBER: _ClassVar[int]
    xid: int
    zxid: int
    err: int
    error_message: str
    path: str
    stat: Stat
    data: bytes
    children: _containers.RepeatedScalarFieldContainer[str]
    results: _containers.RepeatedCompositeFieldContainer[OpResult]
    paths: _containers.RepeatedScalarFieldContainer[str]
    number: int
    exists: bool
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    client_infos: _containers.RepeatedCompositeFieldContainer[ClientInfo]
    sasl_token: bytes
    null_data: bool
    def __init__(self, xid: _Optional[int] = ..., zxid: _Optional[int] = ..., err: _Optional[int] = ..., error_message: _Optional[str] = ..., path: _Optional[str] = ..., stat: _Optional[_Union[Stat, _Mapping]] = ..., data: _Optional[bytes] = ..., children: _Optional[_Iterable[str]] = ..., results: _Optional[_Iterable[_Union[OpResult, _Mapping]]] = ..., paths: _Optional[_Iterable[str]] = ..., number: _Optional[int] = ..., exists: _Optional[bool] = ..., acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ..., client_infos: _Optional[_Iterable[_Union[ClientInfo, _Mapping]]] = ..., sasl_token: _Optional[bytes] = ..., null_data: _Optional[bool] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("auth_scheme", "user")
    AUTH_SCHEME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    auth_scheme: str
    user: str
    def __init__(self, auth_scheme: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("type", "state", "path", "zxid")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    ZXID_FIELD_NUMBER: _ClassVar[int]
    type: int
    state: int
    path: str
    zxid: int
    def __init__(self, type: _Optional[int] = ..., state: _Optional[int] = ..., path: _Optional[str] = ..., zxid: _Optional[int] = ...) -> None: ...

class RequestBatch(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[Request]
    def __init__(self, requests: _Optional[_Iterable[_Union[Request, _Mapping]]] = ...) -> None: ...

class ClientMessage(_message.Message):
    __slots__ = ("connect", "request", "batch")
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    connect: ConnectRequest
    request: Request
    batch: RequestBatch
    def __init__(self, connect: _Optional[_Union[ConnectRequest, _Mapping]] = ..., request: _Optional[_Union[Request, _Mapping]] = ..., batch: _Optional[_Union[RequestBatch, _Mapping]] = ...) -> None: ...

class ServerBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ServerMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ServerMessage, _Mapping]]] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ("connect", "response", "event", "batch")
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    connect: ConnectResponse
    response: Response
    event: WatchEvent
    batch: ServerBatch
    def __init__(self, connect: _Optional[_Union[ConnectResponse, _Mapping]] = ..., response: _Optional[_Union[Response, _Mapping]] = ..., event: _Optional[_Union[WatchEvent, _Mapping]] = ..., batch: _Optional[_Union[ServerBatch, _Mapping]] = ...) -> None: ...

class ForwardRequest(_message.Message):
    __slots__ = ("txns",)
    TXNS_FIELD_NUMBER: _ClassVar[int]
    txns: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, txns: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ForwardResponse(_message.Message):
    __slots__ = ("zxids", "results", "error_code", "error_message")
    ZXIDS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    zxids: _containers.RepeatedScalarFieldContainer[int]
    results: _containers.RepeatedScalarFieldContainer[bytes]
    error_code: str
    error_message: str
    def __init__(self, zxids: _Optional[_Iterable[int]] = ..., results: _Optional[_Iterable[bytes]] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...

class TouchSessionsRequest(_message.Message):
    __slots__ = ("session_ids",)
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    session_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, session_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class TouchSessionsResponse(_message.Message):
    __slots__ = ("unknown_session_ids",)
    UNKNOWN_SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    unknown_session_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, unknown_session_ids: _Optional[_Iterable[int]] = ...) -> None: ...
