from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Entry(_message.Message):
    __slots__ = ("index", "term", "data", "kind")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    data: bytes
    kind: int
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., data: _Optional[bytes] = ..., kind: _Optional[int] = ...) -> None: ...

class SnapshotMeta(_message.Message):
    __slots__ = ("index", "term", "voters", "learners", "observers", "config_index", "config_context")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONFIG_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    voters: _containers.RepeatedScalarFieldContainer[int]
    learners: _containers.RepeatedScalarFieldContainer[int]
    observers: _containers.RepeatedScalarFieldContainer[int]
    config_index: int
    config_context: bytes
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., voters: _Optional[_Iterable[int]] = ..., learners: _Optional[_Iterable[int]] = ..., observers: _Optional[_Iterable[int]] = ..., config_index: _Optional[int] = ..., config_context: _Optional[bytes] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("type", "to", "term", "log_term", "index", "entries", "commit", "reject", "reject_hint", "snapshot", "has_snapshot", "context", "lazy_commits", "log_incomplete")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    REJECT_HINT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    HAS_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LAZY_COMMITS_FIELD_NUMBER: _ClassVar[int]
    LOG_INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    type: int
    to: int
    term: int
    log_term: int
    index: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    commit: int
    reject: bool
    reject_hint: int
    snapshot: SnapshotMeta
    has_snapshot: bool
    context: bytes
    lazy_commits: bool
    log_incomplete: bool
    def __init__(self, type: _Optional[int] = ..., to: _Optional[int] = ..., term: _Optional[int] = ..., log_term: _Optional[int] = ..., index: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., commit: _Optional[int] = ..., reject: _Optional[bool] = ..., reject_hint: _Optional[int] = ..., snapshot: _Optional[_Union[SnapshotMeta, _Mapping]] = ..., has_snapshot: _Optional[bool] = ..., context: _Optional[bytes] = ..., lazy_commits: _Optional[bool] = ..., log_incomplete: _Optional[bool] = ..., **kwargs) -> None: ...

class RaftBatch(_message.Message):
    __slots__ = ("cluster_id", "peers_digest", "messages")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    peers_digest: str
    messages: _containers.RepeatedCompositeFieldContainer[RaftMessage]
    def __init__(self, cluster_id: _Optional[str] = ..., peers_digest: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[RaftMessage, _Mapping]]] = ...) -> None: ...

class StreamAck(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SnapshotChunk(_message.Message):
    __slots__ = ("cluster_id", "message", "data", "last")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    message: RaftMessage
    data: bytes
    last: bool
    def __init__(self, cluster_id: _Optional[str] = ..., message: _Optional[_Union[RaftMessage, _Mapping]] = ..., data: _Optional[bytes] = ..., last: _Optional[bool] = ...) -> None: ...

class SnapshotAck(_message.Message):
    __slots__ = ("ok", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class HelloRequest(_message.Message):
    __slots__ = ("cluster_id", "peers_digest")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    peers_digest: str
    def __init__(self, cluster_id: _Optional[str] = ..., peers_digest: _Optional[str] = ..., **kwargs) -> None: ...

class HelloResponse(_message.Message):
    __slots__ = ("cluster_id", "peers_digest", "node_id", "peers", "members")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    peers_digest: str
    node_id: int
    peers: str
    members: str
    def __init__(self, cluster_id: _Optional[str] = ..., peers_digest: _Optional[str] = ..., node_id: _Optional[int] = ..., peers: _Optional[str] = ..., members: _Optional[str] = ...) -> None: ...

class FetchStateRequest(_message.Message):
    __slots__ = ("cluster_id", "peers_digest", "min_index")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    PEERS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    MIN_INDEX_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    peers_digest: str
    min_index: int
    def __init__(self, cluster_id: _Optional[str] = ..., peers_digest: _Optional[str] = ..., min_index: _Optional[int] = ..., **kwargs) -> None: ...

class ProposeRequest(_message.Message):
    __slots__ = ("commands",)
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, commands: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ProposeResult(_message.Message):
    __slots__ = ("value", "index")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    index: int
    def __init__(self, value: _Optional[bytes] = ..., index: _Optional[int] = ...) -> None: ...

class ProposeResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ProposeResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ProposeResult, _Mapping]]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("key", "linearizable")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    linearizable: bool
    def __init__(self, key: _Optional[bytes] = ..., linearizable: _Optional[bool] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("found", "value", "applied_index")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    found: bool
    value: bytes
    applied_index: int
    def __init__(self, found: _Optional[bool] = ..., value: _Optional[bytes] = ..., applied_index: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FollowerProgress(_message.Message):
    __slots__ = ("id", "match_index", "next_index", "state")
    ID_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    NEXT_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    id: int
    match_index: int
    next_index: int
    state: str
    def __init__(self, id: _Optional[int] = ..., match_index: _Optional[int] = ..., next_index: _Optional[int] = ..., state: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("id", "address", "role", "term", "leader", "leader_address", "commit_index", "applied_index", "last_index", "first_index", "snapshot_index", "followers", "cluster_id", "voters", "learners", "observers", "config_index", "members")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    FOLLOWERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    role: str
    term: int
    leader: int
    leader_address: str
    commit_index: int
    applied_index: int
    last_index: int
    first_index: int
    snapshot_index: int
    followers: _containers.RepeatedCompositeFieldContainer[FollowerProgress]
    cluster_id: str
    voters: _containers.RepeatedScalarFieldContainer[int]
    learners: _containers.RepeatedScalarFieldContainer[int]
    observers: _containers.RepeatedScalarFieldContainer[int]
    config_index: int
    members: str
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ..., role: _Optional[str] = ..., term: _Optional[int] = ..., leader: _Optional[int] = ..., leader_address: _Optional[str] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., last_index: _Optional[int] = ..., first_index: _Optional[int] = ..., snapshot_index: _Optional[int] = ..., followers: _Optional[_Iterable[_Union[FollowerProgress, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., voters: _Optional[_Iterable[int]] = ..., learners: _Optional[_Iterable[int]] = ..., observers: _Optional[_Iterable[int]] = ..., config_index: _Optional[int] = ..., members: _Optional[str] = ...) -> None: ...

class ChangeMembershipRequest(_message.Message):
    __slots__ = ("kind", "node_id", "address")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    kind: int
    node_id: int
    address: str
    def __init__(self, kind: _Optional[int] = ..., node_id: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class ChangeMembershipResponse(_message.Message):
    __slots__ = ("index",)
    INDEX_FIELD_NUMBER: _ClassVar[int]
    index: int
    def __init__(self, index: _Optional[int] = ...) -> None: ...

class TransferLeadershipRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: int
    def __init__(self, target: _Optional[int] = ...) -> None: ...

class TransferLeadershipResponse(_message.Message):
    __slots__ = ("leader",)
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: int
    def __init__(self, leader: _Optional[int] = ...) -> None: ...
