"""Transactions (ZooKeeper multi) with kazoo's builder API.

    t = zk.transaction()
    t.check("/a", 3)
    t.create("/a/b", b"x")
    t.set_data("/a", b"y")
    t.delete("/c")
    results = t.commit()

All ops succeed together or none does (docs/research/quorum.md §1.6). `commit()`
does not raise for a failed op: like kazoo, it returns one result per op --
the created path for create, a `ZnodeStat` for set_data, True for delete and
check -- and when the transaction failed, an exception *instance* in every
slot: `RolledBackError` for ops before the failing one, the failing op's own
error (`NoNodeError`, `BadVersionError`, ...), `RuntimeInconsistency` for ops
after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeAlias

from client.zk.acl import ACL, check_acl_list
from client.zk.exceptions import InvalidACLError
from client.zk.states import CreateMode


@dataclass(frozen=True, slots=True)
class CreateTxnOp:
    path: str
    data: bytes
    mode: CreateMode
    make_parents: bool = False
    ttl_ms: int = 0  # TTL modes only
    acl: tuple[ACL, ...] = ()  # empty: the server's default, world:anyone with every permission


@dataclass(frozen=True, slots=True)
class DeleteTxnOp:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class SetDataTxnOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckTxnOp:
    path: str
    version: int


TxnOp: TypeAlias = CreateTxnOp | DeleteTxnOp | SetDataTxnOp | CheckTxnOp


def check_value(value: object) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"value must be bytes, not {type(value).__name__}")
    return bytes(value)


def check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool):
        raise TypeError(f"version must be an int, not {type(version).__name__}")
    return version


class _TransactionBuilder:
    def __init__(self) -> None:
        self.operations: list[TxnOp] = []
        self.committed = False

    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        container: bool = False,
        ttl_ms: int = 0,
    ) -> None:
        self._check_open()
        mode = CreateMode.of(ephemeral, sequence, container, ttl_ms)
        entries = check_acl_list(acl, str(path))
        if acl is not None and not entries:
            raise InvalidACLError("an ACL list must not be empty", str(path))
        self._add(CreateTxnOp(_path(path), check_value(value), mode, makepath, ttl_ms=ttl_ms, acl=entries))

    def delete(self, path: str, version: int = -1) -> None:
        self._check_open()
        self._add(DeleteTxnOp(_path(path), check_version(version)))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._check_open()
        self._add(SetDataTxnOp(_path(path), check_value(value), check_version(version)))

    def check(self, path: str, version: int) -> None:
        self._check_open()
        self._add(CheckTxnOp(_path(path), check_version(version)))

    def _add(self, op: TxnOp) -> None:
        self.operations.append(op)

    def _check_open(self) -> None:
        if self.committed:
            raise ValueError("transaction already committed")

    def _take(self) -> list[TxnOp]:
        self._check_open()
        self.committed = True
        return list(self.operations)


def _path(path: object) -> str:
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    return path


class AsyncTransaction(_TransactionBuilder):
    """`AsyncZkClient.transaction()`: `await t.commit()`, or `async with zk.transaction() as t:`."""

    def __init__(self, commit: Callable[[Sequence[TxnOp]], Awaitable[list[Any]]]) -> None:
        super().__init__()
        self._commit = commit

    async def commit(self) -> list[Any]:
        return await self._commit(self._take())

    async def __aenter__(self) -> AsyncTransaction:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.commit()


class Transaction(_TransactionBuilder):
    """`ZkClient.transaction()`: `t.commit()`, or `with zk.transaction() as t:` (commits on exit)."""

    def __init__(self, commit: Callable[[Sequence[TxnOp]], list[Any]]) -> None:
        super().__init__()
        self._commit = commit

    def commit(self) -> list[Any]:
        return self._commit(self._take())

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.commit()
