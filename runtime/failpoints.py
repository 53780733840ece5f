"""Disk failpoints for fault tests: make the servers' fsync or write fail on demand.

One environment variable, read once when this module is first imported (process start):

    ZKRAFT_FAILPOINTS=fsync=fail-after:100            the 101st fsync and every later one fail
    ZKRAFT_FAILPOINTS=fsync=fail-if-exists:/run/x     every fsync fails while /run/x exists
    ZKRAFT_FAILPOINTS=write=fail-always,fsync=fail-after:3

A failing point raises OSError(EIO) before the system call, as a dying disk does. `fail-if-exists`
lets a test arm a running node at a moment it chooses (create the file) and leaves the node's other
work untouched until then; the quorum's write-ahead log, the broker's segments and every directory
fsync (runtime.fsync) check the points. A failed fsync leaves the page cache in an unknown state
(Linux may drop the dirty pages and report success to a retry), so the servers never retry: the
quorum node and the broker stop at once (see docs/DESIGN.md, "Disk failures").

Off unless the variable is set: `ON` is a module constant, False in a normal run, and the call sites
test it before anything else (`if failpoints.ON: failpoints.check("fsync")`), so an unset variable
costs one attribute read per write. Not a production feature: nothing in a properties file turns it on.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "ZKRAFT_FAILPOINTS"
POINTS = ("fsync", "write")
_ALWAYS = "fail-always"
_AFTER = "fail-after:"
_IF_EXISTS = "fail-if-exists:"


@dataclass(slots=True)
class _Point:
    """When one point fails: after `passes_left` calls pass (None: no count), or while `trigger` exists."""

    passes_left: int | None = None
    trigger: Path | None = None

    def fails(self) -> bool:
        if self.trigger is not None:
            return self.trigger.exists()
        if self.passes_left is None:
            return True
        if self.passes_left > 0:
            self.passes_left -= 1
            return False
        return True


def _parse_action(point: str, action: str) -> _Point:
    if action == _ALWAYS:
        return _Point()
    if action.startswith(_AFTER):
        count = action[len(_AFTER) :]
        if not count.isdigit():
            raise ValueError(f"{ENV_VAR}: {point}={action}: the count after '{_AFTER}' must be a whole number")
        return _Point(passes_left=int(count))
    if action.startswith(_IF_EXISTS) and len(action) > len(_IF_EXISTS):
        return _Point(trigger=Path(action[len(_IF_EXISTS) :]))
    raise ValueError(f"{ENV_VAR}: {point}={action}: the action must be {_ALWAYS}, {_AFTER}N or {_IF_EXISTS}PATH")


def parse(spec: str) -> dict[str, _Point]:
    """`point=action` pairs, comma-separated; a clear ValueError names what is wrong."""
    points: dict[str, _Point] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        point, sep, action = item.partition("=")
        point = point.strip()
        if not sep or point not in POINTS:
            raise ValueError(f"{ENV_VAR}: {item!r}: expected POINT=ACTION with POINT one of {', '.join(POINTS)}")
        if point in points:
            raise ValueError(f"{ENV_VAR}: {point} is given twice")
        points[point] = _parse_action(point, action.strip())
    return points


_points: dict[str, _Point] = {}
# The variable's problem, if any: `zkraft` refuses to start with it (zkraft.cli), as it does a bad property.
CONFIG_ERROR: str | None = None
ON = False


def configure(spec: str) -> None:
    """Arm the points `spec` names, disarming the others ("" turns every point off). Start-up and tests only."""
    global _points, ON
    _points = parse(spec)
    ON = bool(_points)


def check(point: str) -> None:
    """Raise OSError(EIO) when `point` is armed and due to fail. Call only when `ON`."""
    armed = _points.get(point)
    if armed is not None and armed.fails():
        raise OSError(errno.EIO, f"{point} failed (failpoint {ENV_VAR})")


try:
    configure(os.environ.get(ENV_VAR, ""))
except ValueError as _error:
    CONFIG_ERROR = str(_error)
