"""Writes refused before they reach the log, with ZooKeeper's error and a one-line reason.

ZooKeeper reads a multi with MultiOperationRecord.deserialize, which throws
"Invalid type of op" for an op of no known type; PrepRequestProcessor
(pRequestHelper, `catch (Exception e)`) turns that into an error transaction
with MARSHALLINGERROR, and FinalRequestProcessor answers the whole request
with it (the outer error, no per-op results). An op message with no kind set
is zkraft's form of such an op. Everything else about a write (paths, create
modes, versions, sessions) is checked where ZooKeeper checks it, when the
transaction is applied (zkemu.tree, after PrepRequestProcessor).
"""

from __future__ import annotations

from typing import Any

from zkemu.errors import Code
from zkemu.tree import DATA_BYTES_MAX


def write_problem(op: str, body: Any) -> tuple[Code, str] | None:
    """(error code, reason) if the write `op` (Request.WhichOneof("op")) cannot go to the log, else None."""
    if op != "multi":
        return _data_problem(body)
    for k, item in enumerate(body.ops):
        kind = item.WhichOneof("op")
        if kind is None:
            return Code.MARSHALLINGERROR, f"multi op {k} has no operation set (Invalid type of op)"
        problem = _data_problem(getattr(item, kind))
        if problem is not None:
            return problem
    return None


def _data_problem(body: Any) -> tuple[Code, str] | None:
    """A znode holds 1 MiB at most (zkemu.tree.DATA_BYTES_MAX): more is refused before it is replicated."""
    data = getattr(body, "data", b"")
    if len(data) > DATA_BYTES_MAX:
        return Code.BADARGUMENTS, (
            f"data of {len(data)} bytes for {body.path} exceeds the 1 MiB ({DATA_BYTES_MAX} bytes) limit"
        )
    return None
