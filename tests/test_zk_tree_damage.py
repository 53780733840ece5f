"""A damaged state-machine database: found at open, moved aside, reopened empty; an LMDB error while
running marks it for the next open.

The trees are real LMDB environments damaged the way a failing disk would:
random bytes over the pages that hold a known record, a record rewritten
with values that contradict the rest, a marker left by a failed apply.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest
import structlog
from structlog.testing import capture_logs

from quorum.raft.types import Entry
from quorum.register_command import encode_set
from quorum.state_check import (
    DAMAGED_COPIES_KEPT,
    DAMAGED_MARKER,
    StateCheckError,
    StateMachineDamagedError,
    damage_of,
    move_aside,
)
from quorum.state_machine import RegisterMap
from tests.disk_damage import damage_pages_holding
from zkemu.tree import TREE_CHECKER, ZnodeTree
from zkraft_proto import zk_pb2 as pb

MARKER = b"damage-me-" + b"m" * 40


def create(index: int, path: str, data: bytes) -> Entry:
    txn = pb.Txn(time_ms=1_700_000_000_000 + index, create=pb.CreateOp(path=path, data=data))
    return Entry(index, 1, txn.SerializeToString())


def build_tree(path: Path, znodes: int = 2000) -> str:
    """A tree with `znodes` znodes under 20 parents and the marker znode; returns its digest."""
    tree = ZnodeTree(path)
    entries = [create(i + 1, f"/p{i:02d}", b"") for i in range(20)]
    entries += [create(21 + i, f"/p{i % 20:02d}/n{i:05d}", b"value-%d" % i) for i in range(znodes)]
    entries.append(create(21 + znodes, "/marker", MARKER))
    tree.apply(entries)
    digest = tree.digest()
    tree.close()
    return digest


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


@pytest.fixture
def tree_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "zk"


def test_a_sound_tree_is_kept_as_it_is(tree_dir: Path) -> None:
    digest = build_tree(tree_dir)
    with capture_logs() as logs:
        tree = ZnodeTree(tree_dir)
    assert not tree.rebuilt and tree.digest() == digest and tree.applied_index() == 2021
    assert logs == []
    tree.close()


def test_random_bytes_over_a_live_page_are_found_and_the_file_moved_aside(tree_dir: Path) -> None:
    build_tree(tree_dir)
    assert damage_pages_holding(tree_dir / "data.mdb", MARKER, seed=7) >= 1
    with capture_logs() as logs:
        tree = ZnodeTree(tree_dir)
    assert tree.rebuilt
    assert tree.applied_index() == 0 and tree.node_count() == 4, "reopened empty: only the built-in nodes"
    [damaged] = events(logs, "state_machine_damaged")
    assert damaged["phase"] == "open" and damaged["path"] == str(tree_dir / "data.mdb")
    [moved] = events(logs, "state_machine_moved_aside")
    kept = list(tree_dir.glob("data.mdb.damaged-*"))
    assert [str(p) for p in kept] == [moved["moved_to"]], "the damaged file is kept beside the new one"
    assert kept[0].stat().st_size > 0
    tree.close()
    reopened = ZnodeTree(tree_dir)
    assert not reopened.rebuilt, "the fresh database is sound"
    reopened.close()


def put_raw(tree_dir: Path, db: bytes, key: bytes, value: bytes) -> None:
    """Rewrite one record behind the tree's back: a value garbled in place, as LMDB cannot notice."""
    env = lmdb.open(str(tree_dir), max_dbs=5)
    with env.begin(write=True) as txn:
        txn.put(key, value, db=env.open_db(db, txn=txn))
    env.close()


@pytest.mark.parametrize(
    ("db", "key", "value", "said"),
    [
        (b"nodes", b"/p03", b"\x00" * 7, "shorter than a stat"),
        (b"nodes", b"/p03", (b"\x7f" + b"\x00" * 7) * 3 + b"\x00" * 40, "outside 0..221"),
        (b"nodes", b"p-no-slash", b"\x00" * 64, "is not a znode path"),
        (b"children", b"/p03\x00ghost", b"", "names no node"),
        (b"ephemerals", b"\x00" * 7 + b"\x01/p03", b"", "names no ephemeral"),
        (b"meta", b"applied_index", b"\x01", "is not 8 bytes"),
    ],
)
def test_a_record_that_contradicts_the_rest_is_damage(
    tree_dir: Path, db: bytes, key: bytes, value: bytes, said: str
) -> None:
    build_tree(tree_dir, znodes=200)
    put_raw(tree_dir, db, key, value)
    problem = damage_of(tree_dir, TREE_CHECKER)
    assert problem is not None and said in problem, problem


def test_a_check_killed_by_a_signal_means_damage(tree_dir: Path) -> None:
    build_tree(tree_dir, znodes=10)
    problem = damage_of(tree_dir, f"{__name__}:abort_checker")
    assert problem is not None and "SIGABRT" in problem


def abort_checker(path: Path) -> None:
    """A checker that dies as LMDB does on some garbled pages (an assertion: abort)."""
    os.kill(os.getpid(), signal.SIGABRT)


def kill_checker(path: Path) -> None:
    """A checker killed from outside, as the OOM killer would."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_check_that_cannot_run_refuses_to_start_instead_of_moving_the_file(tree_dir: Path) -> None:
    build_tree(tree_dir, znodes=10)
    with pytest.raises(StateCheckError, match="state check .* failed with exit code 2"):
        damage_of(tree_dir, "no_such_module_anywhere:check")
    with pytest.raises(StateCheckError, match="was killed by SIGKILL"):
        damage_of(tree_dir, f"{__name__}:kill_checker")
    assert (tree_dir / "data.mdb").exists()


class _FailingEnv:
    """An environment whose write transactions fail as a damaged file makes them fail."""

    def __init__(self, env: lmdb.Environment, error: lmdb.Error) -> None:
        self._env = env
        self._error = error

    def begin(self, write: bool = False, **kwargs: Any) -> lmdb.Transaction:
        if write:
            raise self._error
        return self._env.begin(write=write, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


def test_an_lmdb_error_while_applying_marks_the_tree_and_the_next_open_rebuilds_it(tree_dir: Path) -> None:
    build_tree(tree_dir, znodes=10)
    tree = ZnodeTree(tree_dir)
    tree._env = _FailingEnv(tree._env, lmdb.CorruptedError("mdb_put: MDB_CORRUPTED"))  # type: ignore[assignment]
    tree.prepare([create(32, "/late", b"")])  # ahead of the commit: refused quietly, the apply says it
    with pytest.raises(StateMachineDamagedError, match="MDB_CORRUPTED"):
        tree.apply([create(32, "/late", b"")])
    assert (tree_dir / DAMAGED_MARKER).exists()
    tree.close()
    with capture_logs() as logs:
        reopened = ZnodeTree(tree_dir)
    assert reopened.rebuilt and reopened.applied_index() == 0
    [damaged] = events(logs, "state_machine_damaged")
    assert "marked damaged at run time" in damaged["error"] and "MDB_CORRUPTED" in damaged["error"]
    assert not (tree_dir / DAMAGED_MARKER).exists()
    reopened.close()


def test_a_full_map_is_a_limit_not_damage(tree_dir: Path) -> None:
    build_tree(tree_dir, znodes=10)
    tree = ZnodeTree(tree_dir)
    tree._env = _FailingEnv(tree._env, lmdb.MapFullError("mdb_put: MDB_MAP_FULL"))  # type: ignore[assignment]
    with pytest.raises(lmdb.MapFullError):
        tree.apply([create(32, "/late", b"")])
    assert not (tree_dir / DAMAGED_MARKER).exists()
    tree.close()


def test_damaged_copies_kept_are_bounded(tree_dir: Path) -> None:
    tree_dir.mkdir()
    with capture_logs() as logs:
        for k in range(DAMAGED_COPIES_KEPT + 2):
            (tree_dir / "data.mdb").write_bytes(b"copy %d" % k)
            move_aside(tree_dir, structlog.get_logger())
    kept = sorted(tree_dir.glob("data.mdb.damaged-*"))
    assert [p.read_bytes() for p in kept] == [b"copy %d" % k for k in range(2, DAMAGED_COPIES_KEPT + 2)]
    assert len(events(logs, "state_machine_damaged_copy_removed")) == 2


def test_a_damaged_register_map_is_moved_aside_too(tmp_path: Path) -> None:
    path = tmp_path / "state"
    sm = RegisterMap(path)
    sm.apply([Entry(i, 1, encode_set(b"key-%05d" % i, MARKER + b"%d" % i)) for i in range(1, 3001)])
    sm.close()
    assert damage_pages_holding(path / "data.mdb", MARKER + b"1500", seed=7) >= 1
    with capture_logs() as logs:
        reopened = RegisterMap(path)
    assert reopened.rebuilt and reopened.applied_index() == 0 and reopened.read(b"key-00001") is None
    assert len(events(logs, "state_machine_moved_aside")) == 1
    reopened.close()
