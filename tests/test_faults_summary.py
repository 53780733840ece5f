"""The long campaigns' summary (tests/faults/campaign_cli.py), made from the runs' lines alone, and
`--summary FILE...` on both scripts: the figures issue 29 asks for from runs made earlier or elsewhere."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.faults.campaign_cli import summarise
from tests.quorum_harness import REPO_ROOT

ZK_LINES = [
    "seed=1 workload=lock faults=split(leader,3.0s)->n2,torn(follower,2.9s)->n1 ops=300 unknown=2 "
    "converged_s=0.50,1.50 caught_up_s=0.90,2.10 anomalies=none run_s=50.0",
    "seed=2 workload=register faults=- ops=0 unknown=0 converged_s=- anomalies=no_first_leader run_s=61.0",
    "  evidence kept in run-2; replay: python3 scripts/fault_campaign.py --runs 1 --seed 2 --faults kill",
    "seed=3 workload=register faults=kill(leader,3.1s)->n3 ops=700 unknown=5 converged_s=0.30 caught_up_s=0.40 "
    "anomalies=nonlinearizable,node_exited:n1=1 run_s=40.0",
]
KAFKA_LINE = (
    "seed=7 faults=broker-split(controller,4.5s)->b1,group-pause(member,5.0s)->g2 ops=3000 unknown=1 "
    "converged_s=0.20,3.00 anomalies=none run_s=90.0"
)


def test_the_summary_counts_runs_operations_faults_and_anomalies_from_the_lines() -> None:
    lines = summarise(ZK_LINES, "heal_to_acked_write").splitlines()
    assert lines[0] == (
        "runs=3 operations=1000 unknown=7 faults={'kill': 1, 'split': 1, 'torn': 1} "
        "anomalies={'no_first_leader': 1, 'node_exited:n1=1': 1, 'nonlinearizable': 1}"
    )
    assert lines[1] == "runs_with_anomalies: 2(no_first_leader) 3(nonlinearizable,node_exited:n1=1)"
    assert lines[2] == "heal_to_acked_write: median 0.50 s, max 1.50 s"
    assert lines[3] == "  by workload: lock median 1.00 s, max 1.50 s; register median 0.30 s, max 0.30 s"
    assert lines[4] == "heal_to_target_caught_up (runs that checked it: 2): median 0.90 s, max 2.10 s"


def test_a_kafka_line_has_no_workload_and_no_catch_up_figure() -> None:
    assert summarise([KAFKA_LINE], "heal_to_acked_produce").splitlines() == [
        "runs=1 operations=3000 unknown=1 faults={'broker-split': 1, 'group-pause': 1} anomalies=none",
        "runs_with_anomalies: none",
        "heal_to_acked_produce: median 1.60 s, max 3.00 s",
    ]


def test_both_scripts_summarise_files_and_refuse_a_file_without_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zk, kafka = _script("fault_campaign.py"), _script("fault_campaign_kafka.py")
    first, second = tmp_path / "part1.out", tmp_path / "part2.out"
    first.write_text("\n".join(ZK_LINES[:2]) + "\n", encoding="utf-8")
    second.write_text("\n".join(ZK_LINES[2:]) + "\n", encoding="utf-8")
    assert zk.main(["--summary", str(first), str(second)]) == 0
    assert capsys.readouterr().out.startswith("runs=3 operations=1000 ")
    (tmp_path / "kafka.out").write_text(KAFKA_LINE + "\n", encoding="utf-8")
    assert kafka.main(["--summary", str(tmp_path / "kafka.out")]) == 0
    assert "heal_to_acked_produce_on_every_producer_and_partition: median 1.60 s" in capsys.readouterr().out
    assert zk.main(["--summary", str(tmp_path / "nothing.out")]) == 2
    assert capsys.readouterr().err.startswith(f"--summary: cannot read {tmp_path / 'nothing.out'}")
    (tmp_path / "empty.out").write_text("no runs here\n", encoding="utf-8")
    assert kafka.main(["--summary", str(tmp_path / "empty.out")]) == 2
    assert "no run lines (seed=...)" in capsys.readouterr().err


def _script(name: str) -> ModuleType:
    """scripts/<name> as a module (its main() takes argv), not run as __main__."""
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), REPO_ROOT / "scripts" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
