"""bench/zk_bench.py's paired samples: the two systems take turns in blocks, each first in every other block."""

from __future__ import annotations

import asyncio

import pytest

from bench import zk_bench
from bench.zk_bench import PAIRED_BLOCK_SAMPLES, _Probe, paired_samples


class _Recorded:
    """A probe that returns its own name as every sample's value and logs each call in a shared journal."""

    def __init__(self, name: str, journal: list[tuple[str, str, int]], fail_on_open: bool = False) -> None:
        self.name, self.journal, self.fail_on_open = name, journal, fail_on_open
        self.samples_given = 0

    async def open(self) -> None:
        self.journal.append((self.name, "open", 0))
        if self.fail_on_open:
            raise RuntimeError(f"{self.name} cannot connect")

    async def samples(self, n: int) -> list[int]:
        self.journal.append((self.name, "samples", n))
        self.samples_given += n
        return [len(self.name)] * n

    async def close(self) -> None:
        self.journal.append((self.name, "close", 0))


class _BlockingRecorded(_Recorded):
    """The same, with blocking calls, as kazoo's probes have (driven from a thread)."""

    def open(self) -> None:  # type: ignore[override]
        self.journal.append((self.name, "open", 0))

    def samples(self, n: int) -> list[int]:  # type: ignore[override]
        self.journal.append((self.name, "samples", n))
        return [len(self.name)] * n

    def close(self) -> None:  # type: ignore[override]
        self.journal.append((self.name, "close", 0))


def test_blocks_alternate_and_each_system_goes_first_in_every_other_block() -> None:
    journal: list[tuple[str, str, int]] = []
    total = 2 * PAIRED_BLOCK_SAMPLES + 7  # two full blocks and a short one
    ours, theirs = asyncio.run(
        paired_samples(
            _Probe(_Recorded("zkraft", journal), blocking=False),
            _Probe(_BlockingRecorded("zk", journal), blocking=True),
            warmup=11,
            total=total,
        )
    )
    # Warm-up samples are taken but not returned; every returned sample is the right system's.
    assert ours == [len("zkraft")] * total and theirs == [len("zk")] * total
    timed = [(who, n) for who, what, n in journal if what == "samples"]
    assert timed == [
        ("zkraft", 11),
        ("zk", 11),
        ("zkraft", PAIRED_BLOCK_SAMPLES),
        ("zk", PAIRED_BLOCK_SAMPLES),
        ("zk", PAIRED_BLOCK_SAMPLES),
        ("zkraft", PAIRED_BLOCK_SAMPLES),
        ("zkraft", 7),
        ("zk", 7),
    ]
    assert [(who, what) for who, what, _ in journal if what != "samples"] == [
        ("zkraft", "open"),
        ("zk", "open"),
        ("zk", "close"),
        ("zkraft", "close"),
    ]


def test_a_probe_that_cannot_open_leaves_the_other_closed() -> None:
    journal: list[tuple[str, str, int]] = []
    with pytest.raises(RuntimeError, match="zk cannot connect"):
        asyncio.run(
            paired_samples(
                _Probe(_Recorded("zkraft", journal), blocking=False),
                _Probe(_Recorded("zk", journal, fail_on_open=True), blocking=False),
                warmup=1,
                total=3,
            )
        )
    assert ("zkraft", "close", 0) in journal
    assert not [entry for entry in journal if entry[1] == "samples"]


def test_the_summary_gives_each_figures_median_over_runs() -> None:
    def paired(run: int, ours_ms: float, theirs_ms: float) -> dict[str, object]:
        return zk_bench._paired_record("watch_fire", "leader", run, [int(ours_ms * 1e6)], [int(theirs_ms * 1e6)])

    records = [paired(1, 1.0, 2.0), paired(2, 3.0, 2.0), paired(3, 2.0, 4.0)]
    assert [r["p50_ratio"] for r in records] == [0.5, 1.5, 0.5]
    assert zk_bench.paired_figures(records) == {
        "watch_fire_leader": {"zkraft_p50_ms": 2.0, "zookeeper_p50_ms": 2.0, "p50_ratio": 0.5}
    }
