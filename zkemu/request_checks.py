"""Writes refused before they reach the log, with ZooKeeper's error and a one-line reason.

ZooKeeper reads a multi with MultiOperationRecord.deserialize, which throws
"Invalid type of op" for an op of no known type; PrepRequestProcessor
(pRequestHelper, `catch (Exception e)`) turns that into an error transaction
with MARSHALLINGERROR, and FinalRequestProcessor answers the whole request
with it (the outer error, no per-op results). An op message with no kind set
is zkraft's form of such an op. A TTL create with `zookeeper.extendedTypesEnabled`
off gets UNIMPLEMENTED here (validateCreateRequest), from this node's setting, so
that no log entry's outcome depends on the settings of the node applying it.
Everything else about a write (paths, create modes, TTL ranges, versions,
sessions) is checked where ZooKeeper checks it, when the transaction is applied
(zkemu.tree, after PrepRequestProcessor).
"""

from __future__ import annotations

from typing import Any

from zkemu.errors import Code
from zkemu.tree import DATA_BYTES_MAX

_TTL_MODES = (5, 6)  # PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL


def write_problem(op: str, body: Any, extended_types_enabled: bool = False) -> tuple[Code, str] | None:
    """(error code, reason) if the write `op` (Request.WhichOneof("op")) cannot go to the log, else None.

    `extended_types_enabled`: the node's zookeeper.extendedTypesEnabled."""
    if op != "multi":
        return _data_problem(body) or _ttl_problem(op, body, extended_types_enabled)
    for k, item in enumerate(body.ops):
        kind = item.WhichOneof("op")
        if kind is None:
            return Code.MARSHALLINGERROR, f"multi op {k} has no operation set (Invalid type of op)"
        item_body = getattr(item, kind)
        problem = _data_problem(item_body) or _ttl_problem(kind, item_body, extended_types_enabled)
        if problem is not None:
            return problem
    return None


def _ttl_problem(op: str, body: Any, extended_types_enabled: bool) -> tuple[Code, str] | None:
    """TTL nodes (create modes 5 and 6) only with zookeeper.extendedTypesEnabled=true, as ZooKeeper."""
    if op == "create" and body.mode in _TTL_MODES and not extended_types_enabled:
        return Code.UNIMPLEMENTED, (
            f"TTL nodes are disabled on this server: {body.path} needs zookeeper.extendedTypesEnabled=true"
        )
    return None


def _data_problem(body: Any) -> tuple[Code, str] | None:
    """A znode holds 1 MiB at most (zkemu.tree.DATA_BYTES_MAX): more is refused before it is replicated."""
    data = getattr(body, "data", b"")
    if len(data) > DATA_BYTES_MAX:
        return Code.BADARGUMENTS, (
            f"data of {len(data)} bytes for {body.path} exceeds the 1 MiB ({DATA_BYTES_MAX} bytes) limit"
        )
    return None
