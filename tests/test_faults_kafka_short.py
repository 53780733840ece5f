"""The short Kafka fault campaign (CI): 3 quorum nodes and 3 brokers each on a host of their own, started with
the commands and server.properties a multi-machine user writes; idempotent producers and a consumer group in
client hosts; every fault kind once (two runs of five faults), the histories checked and the Kafka layer's
convergence after each heal measured.

Root only (network namespaces); skipped with the reason elsewhere. The long campaign is
scripts/fault_campaign_kafka.py; a failing run here prints the command that replays it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults import kafka_check, netns
from tests.faults.kafka_campaign import CONVERGE_DEADLINE_S, FAULT_KINDS, run_kafka_once

pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

_reason = netns.unavailable_reason()
if _reason is not None:
    pytest.skip(f"Kafka fault campaign skipped: {_reason}", allow_module_level=True)

# Fixed seeds, and the kinds of each run: together every kind once. A failure is replayed with the command
# printed in its message.
RUNS = {
    2950: ("broker-split", "quorum-pause", "group-pause", "broker-kill", "quorum-isolate"),
    2951: ("broker-isolate", "quorum-kill", "group-isolate", "broker-pause", "quorum-split"),
}


def test_the_runs_cover_every_fault_kind() -> None:
    assert sorted(k for kinds in RUNS.values() for k in kinds) == sorted(FAULT_KINDS)


@pytest.mark.parametrize("seed", sorted(RUNS))
def test_faults_on_brokers_and_quorum_lose_nothing_acknowledged_and_the_cluster_converges(
    seed: int, tmp_path: Path
) -> None:
    result = run_kafka_once(seed, tmp_path, kinds=RUNS[seed])
    print(result.line())
    assert not result.anomalies, (
        f"{result.line()}\nreplay: {result.replay_command()}\nevidence: {result.root}\n{result.explanation}"
    )
    assert len(result.convergence_s) == len(RUNS[seed]), result.line()
    assert all(s < CONVERGE_DEADLINE_S for s in result.convergence_s), result.line()
    assert result.operations > 500, result.line()
    typed = "".join(p.read_text() for p in sorted(tmp_path.glob("*.properties")))
    assert "127.0.0.1" not in typed and "localhost" not in typed, typed
    _assert_a_lost_value_is_caught(tmp_path)


def _assert_a_lost_value_is_caught(root: Path) -> None:
    """The final read with one acknowledged value taken out: the checker names it lost."""
    final = {int(p): [(o, v) for o, v in rows] for p, rows in json.loads((root / "final.json").read_text()).items()}
    produced = [json.loads(line) for line in (root / "history-p1.jsonl").read_text().splitlines()]
    acked = next(r for r in reversed(produced) if r.get("c") is not None)
    value = f"p{acked['p']}-{acked['s']}"
    final[acked["part"]] = [(o, v) for o, v in final[acked["part"]] if v != value]
    found = kafka_check.produced(produced, final)
    assert list(found) == ["lost"] and value in found["lost"][0], found
