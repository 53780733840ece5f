"""ZooKeeper error codes and one exception class per code (`KeeperException.java`, research §1.4).

The numbers are ZooKeeper's and travel on the wire (`TxnResult.err`,
`OpResult.err`, `Response.err`). `error_for(code, message)` maps a code back
to its class, `message_for(code, path)` renders ZooKeeper's one-line text
("KeeperErrorCode = NoNode for /a/b"), which is what a Java client prints.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Code(enum.IntEnum):
    OK = 0
    SYSTEMERROR = -1
    RUNTIMEINCONSISTENCY = -2
    DATAINCONSISTENCY = -3
    CONNECTIONLOSS = -4
    MARSHALLINGERROR = -5
    UNIMPLEMENTED = -6
    OPERATIONTIMEOUT = -7
    BADARGUMENTS = -8
    UNKNOWNSESSION = -12
    NEWCONFIGNOQUORUM = -13
    RECONFIGINPROGRESS = -14
    APIERROR = -100
    NONODE = -101
    NOAUTH = -102
    BADVERSION = -103
    NOCHILDRENFOREPHEMERALS = -108
    NODEEXISTS = -110
    NOTEMPTY = -111
    SESSIONEXPIRED = -112
    INVALIDCALLBACK = -113
    INVALIDACL = -114
    AUTHFAILED = -115
    SESSIONMOVED = -118
    NOTREADONLY = -119
    EPHEMERALONLOCALSESSION = -120
    NOWATCHER = -121
    REQUESTTIMEOUT = -122
    RECONFIGDISABLED = -123
    SESSIONCLOSEDREQUIRESASLAUTH = -124
    QUOTAEXCEEDED = -125
    THROTTLEDOP = -127


# KeeperException.getCodeMessage: the words after "KeeperErrorCode = ".
_CODE_TEXT: dict[Code, str] = {
    Code.OK: "ok",
    Code.SYSTEMERROR: "SystemError",
    Code.RUNTIMEINCONSISTENCY: "RuntimeInconsistency",
    Code.DATAINCONSISTENCY: "DataInconsistency",
    Code.CONNECTIONLOSS: "ConnectionLoss",
    Code.MARSHALLINGERROR: "MarshallingError",
    Code.UNIMPLEMENTED: "Unimplemented",
    Code.OPERATIONTIMEOUT: "OperationTimeout",
    Code.BADARGUMENTS: "BadArguments",
    Code.UNKNOWNSESSION: "Unknown session",
    Code.NEWCONFIGNOQUORUM: "NewConfigNoQuorum",
    Code.RECONFIGINPROGRESS: "ReconfigInProgress",
    Code.APIERROR: "APIError",
    Code.NONODE: "NoNode",
    Code.NOAUTH: "NoAuth",
    Code.BADVERSION: "BadVersion",
    Code.NOCHILDRENFOREPHEMERALS: "NoChildrenForEphemerals",
    Code.NODEEXISTS: "NodeExists",
    Code.NOTEMPTY: "Directory not empty",
    Code.SESSIONEXPIRED: "Session expired",
    Code.INVALIDCALLBACK: "Invalid callback",
    Code.INVALIDACL: "InvalidACL",
    Code.AUTHFAILED: "AuthFailed",
    Code.SESSIONMOVED: "Session moved",
    Code.NOTREADONLY: "Not a read-only call",
    Code.EPHEMERALONLOCALSESSION: "Ephemeral node on local session",
    Code.NOWATCHER: "No such watcher",
    Code.REQUESTTIMEOUT: "Request timeout",
    Code.RECONFIGDISABLED: "Reconfig is disabled",
    Code.SESSIONCLOSEDREQUIRESASLAUTH: "Session closed because client failed to authenticate",
    Code.QUOTAEXCEEDED: "Quota has exceeded",
    Code.THROTTLEDOP: "Op throttled due to high load",
}


def message_for(code: int, path: str | None = None) -> str:
    """ZooKeeper's text for an error: "KeeperErrorCode = NoNode for /a/b" (KeeperException.getMessage)."""
    try:
        text = _CODE_TEXT[Code(code)]
    except ValueError:
        text = f"Unknown error {code}"
    if not path:
        return f"KeeperErrorCode = {text}"
    return f"KeeperErrorCode = {text} for {path}"


class ZkError(Exception):
    """Base of every ZooKeeper error; `code` is the wire code, `retriable` says a retry may succeed."""

    code: Code = Code.SYSTEMERROR
    retriable: ClassVar[bool] = False

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or message_for(code))
        try:
            self.code = Code(code)
        except ValueError:
            # A code this version does not know: keep the number, as Java's "Unknown error".
            self.code = code  # type: ignore[assignment]
        self.message = message or message_for(code)


class _CodedError(ZkError):
    """A class bound to one code: constructed with the message only."""

    def __init__(self, message: str = "") -> None:
        super().__init__(type(self).code, message)


class SystemZkError(_CodedError):
    code = Code.SYSTEMERROR


class RuntimeInconsistencyError(_CodedError):
    code = Code.RUNTIMEINCONSISTENCY


class DataInconsistencyError(_CodedError):
    code = Code.DATAINCONSISTENCY


class ConnectionLossError(_CodedError):
    code = Code.CONNECTIONLOSS
    retriable = True


class MarshallingError(_CodedError):
    code = Code.MARSHALLINGERROR


class UnimplementedError(_CodedError):
    code = Code.UNIMPLEMENTED


class OperationTimeoutError(_CodedError):
    code = Code.OPERATIONTIMEOUT
    retriable = True


class BadArgumentsError(_CodedError):
    code = Code.BADARGUMENTS


class UnknownSessionError(_CodedError):
    code = Code.UNKNOWNSESSION


class NewConfigNoQuorumError(_CodedError):
    code = Code.NEWCONFIGNOQUORUM


class ReconfigInProgressError(_CodedError):
    code = Code.RECONFIGINPROGRESS


class ApiError(_CodedError):
    code = Code.APIERROR


class NoNodeError(_CodedError):
    code = Code.NONODE


class NoAuthError(_CodedError):
    code = Code.NOAUTH


class BadVersionError(_CodedError):
    code = Code.BADVERSION


class NoChildrenForEphemeralsError(_CodedError):
    code = Code.NOCHILDRENFOREPHEMERALS


class NodeExistsError(_CodedError):
    code = Code.NODEEXISTS


class NotEmptyError(_CodedError):
    code = Code.NOTEMPTY


class SessionExpiredError(_CodedError):
    code = Code.SESSIONEXPIRED


class InvalidCallbackError(_CodedError):
    code = Code.INVALIDCALLBACK


class InvalidAclError(_CodedError):
    code = Code.INVALIDACL


class AuthFailedError(_CodedError):
    code = Code.AUTHFAILED


class SessionMovedError(_CodedError):
    code = Code.SESSIONMOVED


class NotReadOnlyError(_CodedError):
    code = Code.NOTREADONLY


class EphemeralOnLocalSessionError(_CodedError):
    code = Code.EPHEMERALONLOCALSESSION


class NoWatcherError(_CodedError):
    code = Code.NOWATCHER


class RequestTimeoutError(_CodedError):
    code = Code.REQUESTTIMEOUT
    retriable = True


class ReconfigDisabledError(_CodedError):
    code = Code.RECONFIGDISABLED


class SessionClosedRequireSaslAuthError(_CodedError):
    code = Code.SESSIONCLOSEDREQUIRESASLAUTH


class QuotaExceededError(_CodedError):
    code = Code.QUOTAEXCEEDED


class ThrottledOpError(_CodedError):
    code = Code.THROTTLEDOP
    retriable = True


ERROR_CLASSES: dict[Code, type[_CodedError]] = {
    cls.code: cls
    for cls in (
        SystemZkError,
        RuntimeInconsistencyError,
        DataInconsistencyError,
        ConnectionLossError,
        MarshallingError,
        UnimplementedError,
        OperationTimeoutError,
        BadArgumentsError,
        UnknownSessionError,
        NewConfigNoQuorumError,
        ReconfigInProgressError,
        ApiError,
        NoNodeError,
        NoAuthError,
        BadVersionError,
        NoChildrenForEphemeralsError,
        NodeExistsError,
        NotEmptyError,
        SessionExpiredError,
        InvalidCallbackError,
        InvalidAclError,
        AuthFailedError,
        SessionMovedError,
        NotReadOnlyError,
        EphemeralOnLocalSessionError,
        NoWatcherError,
        RequestTimeoutError,
        ReconfigDisabledError,
        SessionClosedRequireSaslAuthError,
        QuotaExceededError,
        ThrottledOpError,
    )
}


def error_for(code: int, message: str = "") -> ZkError:
    """The exception for a non-zero wire code (a bare `ZkError` for a code this version does not know)."""
    if code == Code.OK:
        raise ValueError("code 0 (OK) is not an error")
    try:
        cls = ERROR_CLASSES[Code(code)]
    except ValueError:
        return ZkError(code, message)
    return cls(message)
