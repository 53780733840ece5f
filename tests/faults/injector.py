"""Applies one fault to the hosted cluster and heals it (see campaign.py for what each kind does)."""

from __future__ import annotations

from collections.abc import Callable

from tests.faults.cluster import HostedQuorum
from tests.faults.netns import Host, Network
from tests.faults.torn import tear_quorum_log


def apply(
    kind: str, target: int, network: Network, cluster: HostedQuorum, clients: dict[int, Host]
) -> Callable[[], None]:
    """Start fault `kind` on node `target`; return the function that heals it."""
    node = cluster.hosts[target]
    others = [host for node_id, host in sorted(cluster.hosts.items()) if node_id != target]
    match kind:
        case "isolate":
            network.isolate(node)
            return network.heal
        case "split":
            minority = [node, clients[target]]
            majority = others + [host for w, host in sorted(clients.items()) if w != target]
            network.partition(minority, majority)
            return network.heal
        case "bridge":
            network.partition([others[0]], [others[1]])
            return network.heal
        case "oneway":
            for other in others:
                network.cut(node, other)
            return network.heal
        case "pause":
            cluster.pause(target)
            return lambda: cluster.resume(target)
        case "kill":
            cluster.kill(target)
            return lambda: cluster.start(target)
        case "disk":
            cluster.fail_disk(target)

            # A node that did not stop on its failed fsync is left down: the run reports its exit code.
            return lambda: _ignore(cluster.restart_after_disk_failure(target))
        case "torn":
            cluster.kill(target)
            tear_quorum_log(cluster.data_dir(target))
            return lambda: _ignore(cluster.start_and_wait_started(target))
    raise ValueError(f"unknown fault kind {kind!r}")


def _ignore(_outcome: object) -> None:
    """Heals return nothing: a node that did not stop or start as it should shows in the cluster's exit codes."""
