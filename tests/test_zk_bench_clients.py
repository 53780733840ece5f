"""bench/zk_bench.py with ZooKeeper's own clients: --client kazoo, the Java load (--java) and their ratios.

The figures themselves are never asserted (benchmarks print, tests do not time); what is checked is that the
options parse as documented, that the summary puts each system's figures and zkraft / ZooKeeper ratios where
the README says, and that the Java worker (bench/java/ZkLoad.java, compiled at run time) speaks the
benchmark's protocol against a real ZooKeeper server and counts its requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench import java_load, zk_bench
from bench.zk_bench import Load, Nodes, parse_args, run_ratios, summarize, throughput
from tests.quorum_harness import FAST_ZK_PROPERTIES, QuorumProcesses, wait_for_leader

JAVA_WINDOW_ARGS = ["--seconds", "0.5", "--warmup", "0.2", "--payload-bytes", "10"]


def test_kazoo_and_java_imply_the_real_zookeeper_they_are_compared_with() -> None:
    assert not parse_args([]).real_zookeeper
    assert parse_args(["--client", "kazoo"]).real_zookeeper
    java = parse_args(["--java", "--java-processes", "2,3", "--java-inflight", "50"])
    assert java.real_zookeeper and java.java_processes == (2, 3) and java.java_inflight == 50
    assert parse_args([]).java_processes == (1, 4) and parse_args([]).java_inflight == 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--java-processes", "0"], "each process count must be in [1, 64], got '0'"),
        (["--java-processes", "one"], "expected comma-separated process counts such as 1,4, got 'one'"),
        (["--java-inflight", "0"], "--java-inflight must be >= 1, got 0"),
        (["--client", "curator"], "invalid choice: 'curator'"),
    ],
)
def test_bad_options_are_refused_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def _throughput(system: str, client: str, run: int, op: str, ops_per_s: float, clients: int = 1) -> dict[str, Any]:
    return {"measure": "throughput", "system": system, "client": client, "run": run, "op": op, "clients": clients,
            "ops_per_s": ops_per_s, "errors": {}}  # fmt: skip


def _latency(system: str, run: int, measure: str, p50_ms: float, **role: str) -> dict[str, Any]:
    return {"measure": measure, "system": system, "client": "kazoo", "run": run, "p50_ms": p50_ms,
            "p99_ms": 2 * p50_ms, **role}  # fmt: skip


def _run_records(run: int, zkraft_creates: float, java_zkraft: float) -> list[dict[str, Any]]:
    """One run's records: kazoo figures of both systems, and a 1-process Java load on each."""
    records = []
    systems = (("zkraft", zkraft_creates, 1.0, java_zkraft), ("zookeeper", 1000.0, 2.0, 5000.0))
    for system, creates, seq_ms, java in systems:
        for op in zk_bench.THROUGHPUT_OPS:
            records.append(_throughput(system, "kazoo", run, op, creates))
            records.append(_throughput(system, "java", run, op, java))
        records.append(_latency(system, run, "sequential_create", seq_ms, role="leader"))
        for role in ("leader", "follower"):
            records.append(_latency(system, run, "watch_fire", seq_ms, setter_role=role))
    return records


def test_the_summary_gives_medians_of_each_runs_ratio_and_the_issues_targets() -> None:
    args = parse_args(["--client", "kazoo", "--java", "--java-processes", "1", "--runs", "3"])
    records: list[dict[str, Any]] = []
    for run, creates, java in ((1, 1200.0, 4000.0), (2, 2000.0, 6000.0), (3, 1800.0, 7000.0)):
        records += _run_records(run, creates, java)
        records.append(run_ratios(records, run, args))
    per_run = [r for r in records if r["measure"] == "vs_real_zookeeper"]
    assert [r["figures"]["creates_per_s"] for r in per_run] == [1.2, 2.0, 1.8]
    assert [r["java"]["1_processes"]["set_data_per_s"] for r in per_run] == [0.8, 1.2, 1.4]

    summary = summarize(records, args, real_zk_skipped=None)
    assert summary["client"] == "kazoo"
    assert summary["creates_per_s"] == 1800.0 and summary["real_zookeeper"]["creates_per_s"] == 1000.0
    assert summary["vs_real_zookeeper"]["creates_per_s"] == 1.8
    assert summary["vs_real_zookeeper"]["sequential_create_p50_ms"] == 0.5
    creates = summary["targets"]["creates_per_s"]
    assert creates == {"measured": 1800.0, "real_zookeeper": 1000.0, "ratio": 1.8, "target_ratio": ">= 1.5",
                       "met": True}  # fmt: skip
    assert summary["targets"]["watch_fire_p50_ms_setter_on_follower"]["met"] is True
    java = summary["java"]["1_processes"]
    assert java["zkraft"]["get_data_leader_per_s"] == 6000.0 and java["zookeeper"]["get_data_leader_per_s"] == 5000.0
    assert java["vs_real_zookeeper"]["creates_per_s"] == 1.2 and java["met"]["creates_per_s"] is True


def test_a_figure_missing_on_one_side_has_no_ratio_and_no_verdict() -> None:
    args = parse_args(["--client", "kazoo"])
    records = [_throughput("zkraft", "kazoo", 1, "create", 900.0), _throughput("zookeeper", "kazoo", 1, "create", 0.0)]
    records.append(run_ratios(records, 1, args))
    summary = summarize(records, args, real_zk_skipped=None)
    assert summary["vs_real_zookeeper"]["creates_per_s"] is None
    assert summary["targets"]["creates_per_s"]["met"] is None
    assert summary["java"] is None


@pytest.mark.skipif(java_load.unavailable_reason() is not None, reason=str(java_load.unavailable_reason()))
def test_the_java_worker_runs_every_phase_against_a_real_zookeeper(tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    from tests.real_zookeeper import RealZooKeeper

    args = parse_args(JAVA_WINDOW_ARGS)
    with RealZooKeeper(tmp_path / "zk") as server:
        server.start_all()
        server.wait_serving(timeout_s=60)
        address = server.addresses[1]
        nodes = Nodes({1: address, 2: address}, leader=1, follower_a=2, follower_b=2)
        records = asyncio.run(throughput({}, nodes, tmp_path / "workers", 1, args, Load("java", 2, 5)))
        # Every process created under its own prefix, and its data nodes hold its payload.
        zk = KazooClient(address)
        zk.start(timeout=30)
        try:
            created = [len(zk.get_children(f"/bench/run1/java-2p-{k}/create")) for k in range(2)]
            payload = zk.get("/bench/run1/java-2p-1/data/w4")[0]
        finally:
            zk.stop()
            zk.close()
    assert [r["op"] for r in records] == list(zk_bench.THROUGHPUT_OPS)
    for record in records:
        assert record["client"] == "java" and record["clients"] == 2 and record["inflight_per_client"] == 5
        assert record["errors"] == {} and record["unfinished"] == 0
        assert record["ops_per_s"] > 0 and record["samples"] > 0 and len(record["ops_per_s_per_client"]) == 2
    assert all(n > 0 for n in created) and len(payload) == 10


@pytest.mark.skipif(java_load.unavailable_reason() is not None, reason=str(java_load.unavailable_reason()))
def test_kazoo_and_the_java_load_measure_zkraft_through_its_client_ports(tmp_path: Path) -> None:
    """What `--client kazoo --java` runs against zkraft, in small: every phase answers, nothing fails."""
    args = parse_args([*JAVA_WINDOW_ARGS, "--client", "kazoo", "--sequential-ops", "5", "--watch-samples", "5",
                       "--ephemeral-samples", "1"])  # fmt: skip

    async def measure(procs: QuorumProcesses) -> list[dict[str, Any]]:
        leader, _ = await wait_for_leader(procs.addresses, timeout_s=60)
        a, b = (n for n in sorted(procs.addresses) if n != leader)
        nodes = zk_bench.zookeeper_port_nodes(procs, Nodes(dict(procs.addresses), leader, a, b))
        records = await zk_bench.kazoo_latencies(nodes, 1, args, b"x" * 10)
        for load in (Load("kazoo", 1, 5), Load("java", 2, 5)):
            records += await throughput({}, nodes, tmp_path / "workers", 1, args, load)
        return records

    with QuorumProcesses(tmp_path / "cluster", n=3, properties=FAST_ZK_PROPERTIES) as procs:
        procs.start_all()
        records = asyncio.run(measure(procs))
    latencies = [r for r in records if r["measure"] != "throughput"]
    assert (
        sorted(r["measure"] for r in latencies)
        == ["ephemeral_gone"] * 2 + ["sequential_create"] * 2 + ["watch_fire"] * 2
    )
    assert all(r["samples"] >= 1 and r["p50_ms"] > 0 for r in latencies)
    rates = [(r["client"], r["op"]) for r in records if r["measure"] == "throughput"]
    assert rates == [(client, op) for client in ("kazoo", "java") for op in zk_bench.THROUGHPUT_OPS]
    for record in records[len(latencies) :]:
        assert record["errors"] == {} and record["unfinished"] == 0 and record["ops_per_s"] > 0, record
