"""runtime.failpoints: the ZKRAFT_FAILPOINTS grammar, each action's timing, and where the points fire."""

from __future__ import annotations

import errno
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log.checkpoints import write_checkpoint
from broker.log.dir_failure import set_handler
from broker.log.errors import KafkaStorageError
from broker.log.segment import LogSegment
from quorum.lmdb_log_store import LmdbLogStore, LogStoreIOError
from quorum.raft.types import Entry, HardState
from runtime import failpoints
from tests.quorum_harness import REPO_ROOT, subprocess_env


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    failpoints.configure("")
    yield
    failpoints.configure("")


def outcomes(point: str, calls: int) -> list[bool]:
    """For each of `calls` checks of `point`: did it fail?"""
    failed = []
    for _ in range(calls):
        try:
            failpoints.check(point)
        except OSError as exc:
            assert exc.errno == errno.EIO and "ZKRAFT_FAILPOINTS" in str(exc)
            failed.append(True)
        else:
            failed.append(False)
    return failed


def test_nothing_is_armed_unless_the_variable_says_so() -> None:
    assert failpoints.ON is False and failpoints.CONFIG_ERROR is None
    assert outcomes("fsync", 3) == [False] * 3


def test_fail_after_lets_n_calls_pass_then_fails_every_later_one() -> None:
    failpoints.configure("fsync=fail-after:2, write=fail-always")
    assert failpoints.ON
    assert outcomes("fsync", 4) == [False, False, True, True]
    assert outcomes("write", 2) == [True, True]


def test_fail_if_exists_fails_exactly_while_the_file_exists(tmp_path: Path) -> None:
    trigger = tmp_path / "disk-fault"
    failpoints.configure(f"write=fail-if-exists:{trigger}")
    assert outcomes("write", 1) == [False]
    trigger.touch()
    assert outcomes("write", 2) == [True, True]
    assert outcomes("fsync", 1) == [False]  # only the point named
    trigger.unlink()
    assert outcomes("write", 1) == [False]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("disk=fail-always", "POINT one of fsync, write"),
        ("fsync", "expected POINT=ACTION"),
        ("fsync=sometimes", "the action must be fail-always, fail-after:N or fail-if-exists:PATH"),
        ("fsync=fail-after:x", "must be a whole number"),
        ("fsync=fail-if-exists:", "the action must be"),
        ("fsync=fail-always,fsync=fail-after:1", "fsync is given twice"),
    ],
)
def test_a_bad_spec_is_one_clear_error(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match="ZKRAFT_FAILPOINTS") as caught:
        failpoints.parse(spec)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_zkraft_refuses_a_bad_variable_with_one_line_and_a_usage_exit() -> None:
    env = {**subprocess_env(), failpoints.ENV_VAR: "fsync=fail-after:soon"}
    result = subprocess.run(
        [sys.executable, "-m", "zkraft", "quorum", "status", "--server", "127.0.0.1:1"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "zkraft: error: ZKRAFT_FAILPOINTS: fsync=fail-after:soon: the count after 'fail-after:' must be a whole number"
    ]


def test_a_failed_fsync_of_the_raft_log_is_a_log_store_io_error_and_books_nothing(tmp_path: Path) -> None:
    store = LmdbLogStore(tmp_path / "raft")
    store.save(HardState(1, 1, 0), [Entry(1, 1, b"a")], None, sync=True)
    failpoints.configure("fsync=fail-always")
    with pytest.raises(LogStoreIOError, match="fsync failed"):
        store.save(HardState(1, 1, 1), [Entry(2, 1, b"b")], None, sync=True)
    handle = None
    with pytest.raises(LogStoreIOError):
        handle = store.begin_save(None, [Entry(2, 1, b"b")], None)
        handle.wait_durable()
    failpoints.configure("write=fail-always")
    with pytest.raises(LogStoreIOError, match="write failed"):
        store.save(None, [Entry(2, 1, b"c")], None, sync=True)


def test_a_failed_segment_write_or_fsync_is_kafka_storage_error_reported_to_the_handler(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=4096, created_ms=0)
    reported: list[tuple[str, str]] = []
    set_handler(lambda directory, operation, exc: reported.append((directory.name, operation)))
    try:
        failpoints.configure("write=fail-always,fsync=fail-always")
        with pytest.raises(KafkaStorageError, match="append to 00000000000000000000.log in .* failed"):
            segment.append(0, 0, 0, b"x" * 70)
        with pytest.raises(KafkaStorageError) as caught:
            segment.flush()
        assert caught.value.error_code == 56  # KAFKA_STORAGE_ERROR: the producer is not acknowledged
        assert segment.size == 0  # the failed append booked nothing
    finally:
        set_handler(None)
        segment.close()
    assert reported == [(tmp_path.name, "append to 00000000000000000000.log"),
                        (tmp_path.name, "fsync of 00000000000000000000.log")]  # fmt: skip


def test_a_failed_checkpoint_fsync_is_a_failure_of_its_directory(tmp_path: Path) -> None:
    reported: list[tuple[Path, str]] = []
    set_handler(lambda directory, operation, exc: reported.append((directory, operation)))
    try:
        failpoints.configure("fsync=fail-always")
        with pytest.raises(KafkaStorageError, match="checkpoint recovery-point-offset-checkpoint"):
            write_checkpoint(tmp_path / "recovery-point-offset-checkpoint", ["t 0 5"])
    finally:
        set_handler(None)
    assert reported == [(tmp_path, "checkpoint recovery-point-offset-checkpoint")]
