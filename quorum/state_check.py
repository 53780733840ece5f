"""A state machine's LMDB database, checked before it is trusted and moved aside when damaged.

LMDB keeps no page checksums. A page overwritten with garbage makes a read
fail (MDB_CORRUPTED, MDB_PAGE_NOTFOUND), hand back wrong bytes, or kill the
process: writing 8 KiB of random bytes at a random offset of a 6 MB tree of
20,000 znodes, 9 of 150 full reads aborted on an LMDB assertion or died of
SIGBUS. So the check at open runs in a child process (`python -m
quorum.state_check CHECKER DIR`): it opens the environment read-only, reads
every record of every database and decodes it (CHECKER, the state machine's
own `module:function`). A child that reports damage, dies of a signal or does
not finish in time means a damaged database. What no check can see without
checksums: bytes garbled in place that still decode (a znode's data). In that
experiment every damage the check missed had hit free pages only (the tree's
digest was unchanged).

A damaged database is moved aside, not deleted: `data.mdb` becomes
`data.mdb.damaged-<UTC time>` beside it, kept for inspection (the newest
DAMAGED_COPIES_KEPT copies), and the state machine opens a fresh, empty one.
The node then restores it from a snapshot and its log (QuorumNode._open_state_machine).

An LMDB error while the node runs (an apply, a snapshot) leaves a marker file
(`mark_damaged`) and stops the node with StateMachineDamagedError; the next
start finds the marker and rebuilds without trusting the check, which cannot
read LMDB's free-page list.
"""

from __future__ import annotations

import datetime
import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb

from quorum import errors
from runtime.fsync import fsync_directory

DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
DAMAGED_MARKER = "DAMAGED"
DAMAGED_SUFFIX = ".damaged-"
# Damaged copies kept beside the database: a disk that keeps failing must not fill up with them.
DAMAGED_COPIES_KEPT = 3
# The child's time limit: a minute plus a generous read rate, so that only a check stuck in a
# garbled B-tree runs out (100,000 znodes, a 27 MB file, take about 1 s: zkemu/tree_check.py).
CHECK_TIMEOUT_BASE_S = 60.0
CHECK_SECONDS_PER_GIB = 120.0
# LMDB errors that say a limit was reached (map size, readers, memory), not that the file is damaged:
# rebuilding would not help.
_LIMIT_ERRORS = (
    lmdb.MapFullError,
    lmdb.ReadersFullError,
    lmdb.TlsFullError,
    lmdb.TxnFullError,
    lmdb.DbsFullError,
    lmdb.MemoryError,
    lmdb.LockError,
)
# How reading a garbled page kills a process (LMDB's assertions abort); any other signal (the OOM
# killer's SIGKILL, an operator's SIGTERM) says nothing about the file.
_DAMAGE_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL})
# The child's exit codes: the database is damaged; the check could not run at all.
EXIT_DAMAGED = 3
EXIT_CANNOT_RUN = 2


class StateMachineDamagedError(Exception):
    """The state machine's storage failed: the node stops, and its next start rebuilds the database."""


class StateCheckError(errors.StartupError):
    """The check could not run (not a verdict on the database): the node refuses to start."""


class DamagedRecordError(Exception):
    """Raised by a checker for a record that does not decode; the message names it."""


def check_timeout_s(path: Path) -> float:
    try:
        size_bytes = (path / DATA_FILE).stat().st_size
    except OSError:
        size_bytes = 0
    return CHECK_TIMEOUT_BASE_S + CHECK_SECONDS_PER_GIB * size_bytes / (1 << 30)


def damage_of(path: Path, checker: str, timeout_s: float | None = None) -> str | None:
    """None when the database at `path` is sound (or absent); else one line saying what is wrong.

    Raises StateCheckError when the check itself cannot run."""
    if not (path / DATA_FILE).exists():
        return None
    marker = path / DAMAGED_MARKER
    if marker.exists():
        reason = marker.read_text(encoding="utf-8", errors="replace").strip() or "no reason recorded"
        return f"marked damaged at run time: {reason}"
    limit_s = check_timeout_s(path) if timeout_s is None else timeout_s
    command = [sys.executable, "-m", "quorum.state_check", checker, str(path)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=limit_s, env=_child_env(), check=False)
    except subprocess.TimeoutExpired:
        return f"the check did not finish within {limit_s:.0f} s"
    except OSError as exc:
        raise StateCheckError(f"cannot run the state check: {exc}") from None
    said = _last_line(done.stdout) or _last_line(done.stderr)
    if done.returncode == 0:
        return None
    if done.returncode == EXIT_DAMAGED:
        return said or "damaged"
    if -done.returncode in _DAMAGE_SIGNALS:
        name = signal.Signals(-done.returncode).name
        return f"reading it killed the check with {name}" + (f" ({said})" if said else "")
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        raise StateCheckError(f"the state check of {path} was killed by {name}, which says nothing about the file")
    raise StateCheckError(f"the state check of {path} failed with exit code {done.returncode}: {said}")


def move_aside(path: Path, log: Any) -> Path:
    """Rename the damaged data file to `data.mdb.damaged-<UTC time>`; drop the lock file and marker."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    moved = path / f"{DATA_FILE}{DAMAGED_SUFFIX}{stamp}"
    os.replace(path / DATA_FILE, moved)
    (path / LOCK_FILE).unlink(missing_ok=True)  # readers' table only: LMDB rebuilds it
    (path / DAMAGED_MARKER).unlink(missing_ok=True)
    fsync_directory(path)
    log.warning("state_machine_moved_aside", path=str(path / DATA_FILE), moved_to=str(moved))
    copies = sorted(p for p in path.iterdir() if p.name.startswith(DATA_FILE + DAMAGED_SUFFIX))
    for old in copies[:-DAMAGED_COPIES_KEPT]:
        old.unlink(missing_ok=True)
        log.info("state_machine_damaged_copy_removed", path=str(old), kept=DAMAGED_COPIES_KEPT)
    return moved


def set_aside_if_damaged(path: Path, checker: str, log: Any) -> bool:
    """Check the database at `path`; when damaged, log it and move it aside. Returns whether it did."""
    if not (path / DATA_FILE).exists():
        (path / DAMAGED_MARKER).unlink(missing_ok=True)  # about a file no longer there
        return False
    problem = damage_of(path, checker)
    if problem is None:
        return False
    log.error("state_machine_damaged", path=str(path / DATA_FILE), error=problem, phase="open")
    move_aside(path, log)
    return True


def mark_damaged(path: Path, error: BaseException) -> StateMachineDamagedError:
    """Record that the database at `path` failed at run time; the error to raise in its place.

    The marker makes the next start rebuild the database even when the check
    finds nothing (damage in LMDB's free-page list, which the check cannot read).
    """
    reason = f"{type(error).__name__}: {error}"
    try:
        (path / DAMAGED_MARKER).write_text(reason + "\n", encoding="utf-8")
    except OSError:
        pass  # the error below still stops the node; the check at the next start decides
    return StateMachineDamagedError(f"state machine database {path / DATA_FILE} failed: {reason}")


def is_damage(error: lmdb.Error) -> bool:
    """Whether an LMDB error says the file is damaged, rather than that a limit was reached."""
    return not isinstance(error, _LIMIT_ERRORS)


def open_read_only(path: Path, max_dbs: int) -> lmdb.Environment:
    """For a checker: the environment opened for reading only. With LMDB's lock, so that a writer that
    should not be there (a second process on the same directory) cannot make a sound file look torn."""
    return lmdb.open(str(path), readonly=True, lock=True, max_dbs=max_dbs, create=False)


def _child_env() -> dict[str, str]:
    """The child imports this very code: the directory holding the `quorum` package comes first."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def _last_line(output: bytes) -> str:
    lines = output.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else ""


def _load_checker(name: str) -> Callable[[Path], None]:
    module_name, _, function = name.partition(":")
    checker = getattr(importlib.import_module(module_name), function)
    if not callable(checker):
        raise TypeError(f"{name} is not a function")
    return checker  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    """The child: exit 0 when sound, EXIT_DAMAGED with one line on stdout when damaged."""
    if len(argv) != 2:
        print("usage: python -m quorum.state_check MODULE:FUNCTION DIR", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        checker = _load_checker(argv[0])
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        print(f"cannot load checker {argv[0]}: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        checker(Path(argv[1]))
    except Exception as exc:  # anything a damaged file makes the decoding raise is a verdict
        print(f"{type(exc).__name__}: {exc}".replace("\n", " "))
        return EXIT_DAMAGED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
