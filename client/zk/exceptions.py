"""The ZooKeeper client's errors: one class per ZooKeeper error code, named as kazoo names them.

`ZookeeperError` carries the wire `code` (ZooKeeper's `KeeperException.Code`,
docs/research/quorum.md §1.4) and, when known, the `path` it concerns; its message
is one line that names that path. `EXCEPTIONS` maps a code to its class and
`exception_for()` builds the instance for a server reply. `retriable` is True
where retrying the same call is safe and may succeed (`ZkRetry` retries those).

Errors that have no wire code (the client was never started, a wait timed
out, a retry gave up) derive from `ZkException` directly, as kazoo's derive
from `KazooException`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar


class ZkException(Exception):
    """Base of every error this client raises (kazoo's `KazooException`)."""

    retriable: ClassVar[bool] = False


class ZkTimeoutError(ZkException, TimeoutError):
    """A client-side wait ran out, e.g. `start()` found no server in time (kazoo's `KazooTimeoutError`)."""


class ZkTlsError(ZkException):
    """The connection failed for a TLS reason (a plaintext client on a TLS port, a certificate not trusted):
    retrying cannot help, so `start()` raises it at once with the one-line reason."""


class RetryFailedError(ZkException):
    """`ZkRetry` gave up: too many attempts or past its deadline; the last error is the `__cause__`."""


class ZookeeperError(ZkException):
    """An error with a ZooKeeper error code."""

    code: ClassVar[int] = -1
    default_message: ClassVar[str] = "ZooKeeper error"

    def __init__(self, message: str = "", path: str | None = None) -> None:
        if not message:
            message = self.default_message if path is None else f"{self.default_message}: {path}"
        super().__init__(_one_line(message))
        self.path = path


# code -> class; filled by @_code below.
EXCEPTIONS: dict[int, type[ZookeeperError]] = {}
_E = TypeVar("_E", bound=type[ZookeeperError])


def _code(code: int, default_message: str, retriable: bool = False) -> Callable[[_E], _E]:
    def register(cls: _E) -> _E:
        if code in EXCEPTIONS:
            raise RuntimeError(f"error code {code} registered twice ({EXCEPTIONS[code].__name__}, {cls.__name__})")
        cls.code = code
        cls.default_message = default_message
        cls.retriable = retriable
        EXCEPTIONS[code] = cls
        return cls

    return register


@_code(0, "operation rolled back because another operation of the transaction failed")
class RolledBackError(ZookeeperError):
    """In a transaction's results: this op was fine but an op listed after it failed."""


@_code(-1, "system error")
class SystemZookeeperError(ZookeeperError):
    pass


@_code(-2, "operation not run because an earlier operation of the transaction failed")
class RuntimeInconsistency(ZookeeperError):
    """In a transaction's results: an op listed after the one that failed."""


@_code(-3, "data inconsistency")
class DataInconsistency(ZookeeperError):
    pass


@_code(-4, "connection lost", retriable=True)
class ConnectionLoss(ZookeeperError):
    """The connection broke before the reply came: the request may or may not have been applied."""


@_code(-5, "the server could not parse the request")
class MarshallingError(ZookeeperError):
    pass


@_code(-6, "operation not implemented")
class UnimplementedError(ZookeeperError):
    pass


@_code(-7, "operation timed out", retriable=True)
class OperationTimeoutError(ZookeeperError):
    pass


@_code(-8, "bad arguments")
class BadArgumentsError(ZookeeperError):
    pass


@_code(-12, "unknown session")
class UnknownSessionError(ZookeeperError):
    pass


@_code(-13, "no quorum of the new config is connected")
class NewConfigNoQuorumError(ZookeeperError):
    pass


@_code(-14, "another reconfiguration is in progress")
class ReconfigInProcessError(ZookeeperError):
    pass


@_code(-100, "API error")
class APIError(ZookeeperError):
    pass


@_code(-101, "no node")
class NoNodeError(ZookeeperError):
    pass


@_code(-102, "not authorized")
class NoAuthError(ZookeeperError):
    pass


@_code(-103, "bad version")
class BadVersionError(ZookeeperError):
    pass


@_code(-108, "ephemeral nodes may not have children")
class NoChildrenForEphemeralsError(ZookeeperError):
    pass


@_code(-110, "node exists")
class NodeExistsError(ZookeeperError):
    pass


@_code(-111, "node has children")
class NotEmptyError(ZookeeperError):
    pass


@_code(-112, "session expired")
class SessionExpiredError(ZookeeperError):
    """The session is gone (state LOST): its ephemeral nodes are deleted; `start()` makes a new session."""


@_code(-113, "invalid callback")
class InvalidCallbackError(ZookeeperError):
    pass


@_code(-114, "invalid ACL")
class InvalidACLError(ZookeeperError):
    pass


@_code(-115, "authentication failed")
class AuthFailedError(ZookeeperError):
    pass


@_code(-118, "session moved to another server")
class SessionMovedError(ZookeeperError):
    pass


@_code(-119, "not a read-only call")
class NotReadOnlyCallError(ZookeeperError):
    pass


@_code(-120, "ephemeral node on a local session")
class EphemeralOnLocalSessionError(ZookeeperError):
    pass


@_code(-121, "no watcher")
class NoWatcherError(ZookeeperError):
    pass


@_code(-122, "request timed out", retriable=True)
class RequestTimeoutError(ZookeeperError):
    pass


@_code(-123, "reconfiguration is disabled")
class ReconfigDisabledError(ZookeeperError):
    pass


@_code(-124, "session closed; SASL authentication required")
class SessionClosedRequireSaslError(ZookeeperError):
    pass


@_code(-125, "quota exceeded")
class QuotaExceededError(ZookeeperError):
    pass


@_code(-127, "operation throttled: the server is overloaded", retriable=True)
class ThrottledError(ZookeeperError):
    pass


class ConnectionClosedError(SessionExpiredError):
    """The client is stopped (or was never started): no session to send the request on (as kazoo)."""

    default_message: ClassVar[str] = "the client is not connected: call start() first"


class UnknownErrorCode(ZookeeperError):
    """A code this client does not know; `code` is set on the instance."""

    def __init__(self, code: int, message: str = "", path: str | None = None) -> None:
        super().__init__(message or f"unknown ZooKeeper error code {code}", path)
        self.code = code  # type: ignore[misc]


def exception_for(code: int, message: str = "", path: str | None = None) -> ZookeeperError:
    """The exception for error `code` with the server's one-line `message` (or a default naming `path`)."""
    cls = EXCEPTIONS.get(code)
    if cls is None:
        return UnknownErrorCode(code, message, path)
    return cls(message, path)


def _one_line(text: str) -> str:
    return " ".join(text.split())
