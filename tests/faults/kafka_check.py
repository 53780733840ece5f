"""The Kafka run's checkers: pure functions over the histories, each returning one line per anomaly found.

produced(...)       no acknowledged value lost, none twice, none out of its producer's order in a partition,
                    each at the partition and offset its acknowledgement named (KIP-98's idempotent producer:
                    acks=all with min.insync.replicas=2 loses nothing acknowledged, writes nothing twice).
group(...)          one member per partition per generation (Kafka's group protocol: the leader's assignment
                    of one generation is handed out whole by SyncGroup).
commits(...)        a partition's committed offset never goes back: a commit acknowledged before another
                    started is not above it (a stale generation's commit is fenced, ILLEGAL_GENERATION).
controller(...)     one controller epoch acts at a time: along each partition's state versions (zkVersion
                    orders the writes, which are conditional on /controller_epoch's version, KAFKA-1120),
                    the deciding controller's epoch never goes back and one version is decided once;
                    /controller_epoch polled never goes back.
leader_epochs(...)  a partition's leader epoch polled never goes back, and one epoch names one leader.
leader_starts(...)  from the brokers' own logs: no two brokers lead one partition in one leader epoch, and a
                    broker's leader epochs of a partition only grow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

VALUE = re.compile(r"^p(\d+)-(\d+)$")
# One controller decision in state-change.log (broker/state_change_log.py writes Kafka's format).
DECISION = re.compile(
    r"\[Controller id=(?P<id>\d+) epoch=(?P<epoch>\d+)\] Changed partition (?P<tp>\S+) from \S+ to OnlinePartition "
    r"with state LeaderAndIsr\(leader=(?P<leader>-?\d+), leaderEpoch=(?P<le>\d+), isr=List\((?P<isr>[^)]*)\), "
    r"zkVersion=(?P<zkv>\d+)\)"
)
# A broker taking a partition's leadership, in its own state-change.log (Kafka's Partition.makeLeader line).
LEADER_START = re.compile(r"\[Broker id=(?P<id>\d+)\] Leader (?P<tp>\S+) starts at leader epoch (?P<le>\d+) ")
EXAMPLES_MAX = 5


def _limited(kind: str, found: list[str]) -> list[str]:
    """At most EXAMPLES_MAX lines of one kind, and how many more there were."""
    if len(found) <= EXAMPLES_MAX:
        return found
    return [*found[:EXAMPLES_MAX], f"{kind}: {len(found) - EXAMPLES_MAX} more"]


def produced(records: Iterable[dict[str, Any]], final: dict[int, list[tuple[int, str]]]) -> dict[str, list[str]]:
    """Anomalies by kind (lost, duplicated, reordered, misplaced, producer_fatal) of the producers' records
    against the final read of every partition."""
    where: dict[str, list[tuple[int, int]]] = {}
    for part, rows in final.items():
        for offset, value in rows:
            where.setdefault(value, []).append((part, offset))
    found: dict[str, list[str]] = {}
    for r in records:
        if "fatal" in r:
            found.setdefault("producer_fatal", []).append(f"producer {r['p']}: {r['fatal']}")
            continue
        if r["c"] is None:
            continue
        value = f"p{r['p']}-{r['s']}"
        places = where.get(value, [])
        if not places:
            found.setdefault("lost", []).append(f"{value} acknowledged at {r['part']}@{r['off']} is in no partition")
        elif (r["part"], r["off"]) not in places:
            found.setdefault("misplaced", []).append(f"{value} acknowledged at {r['part']}@{r['off']} is at {places}")
    for value, places in sorted(where.items()):
        if len(places) > 1:
            found.setdefault("duplicated", []).append(f"{value} is at {sorted(places)}")
    for part, rows in sorted(final.items()):
        last: dict[int, tuple[int, int]] = {}  # producer -> (seq, offset) last seen in this partition
        for offset, value in rows:
            m = VALUE.match(value)
            if m is None:
                found.setdefault("foreign", []).append(f"partition {part} offset {offset} holds {value!r}")
                continue
            producer, seq = int(m.group(1)), int(m.group(2))
            before = last.get(producer)
            if before is not None and seq < before[0]:  # the same value twice is "duplicated"
                found.setdefault("reordered", []).append(
                    f"partition {part}: p{producer}-{seq} at offset {offset} "
                    f"after p{producer}-{before[0]} at {before[1]}"
                )
            last[producer] = (seq, offset)
    return {kind: _limited(kind, lines) for kind, lines in found.items()}


def group(records: Iterable[dict[str, Any]]) -> list[str]:
    """A partition handed to two members in one generation (from the members' own assign lines)."""
    owners: dict[tuple[int, int], set[int]] = {}
    for r in records:
        if r.get("ev") == "assign" and r.get("gen") is not None:
            for part in r["parts"]:
                owners.setdefault((r["gen"], part), set()).add(r["m"])
    found = [
        f"generation {gen}: partition {part} assigned to members {sorted(members)}"
        for (gen, part), members in sorted(owners.items())
        if len(members) > 1
    ]
    return _limited("group", found)


def commits(records: Iterable[dict[str, Any]]) -> list[str]:
    """A commit acknowledged lower than one acknowledged before it started, per partition."""
    by_part: dict[int, list[tuple[float, float, int, int, int | None]]] = {}
    for r in records:
        if r.get("ev") == "commit":
            for part, offset in r["offs"].items():
                by_part.setdefault(int(part), []).append((r["i"], r["c"], offset, r["m"], r.get("gen")))
    found = []
    for part, rows in sorted(by_part.items()):
        done = sorted(rows, key=lambda row: row[1])  # by completion
        best: tuple[float, float, int, int, int | None] | None = None  # highest among those completed so far
        k = 0
        for row in sorted(rows, key=lambda row: row[0]):  # by invocation
            while k < len(done) and done[k][1] < row[0]:
                if best is None or done[k][2] > best[2]:
                    best = done[k]
                k += 1
            if best is not None and row[2] < best[2]:
                found.append(
                    f"partition {part}: member {row[3]} (generation {row[4]}) committed {row[2]} at {row[1]:.3f} after "
                    f"member {best[3]} (generation {best[4]}) had committed {best[2]} at {best[1]:.3f}"
                )
    return _limited("commits", found)


def decisions(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The controllers' leader-and-ISR decisions found in state-change.log lines."""
    out = []
    for line in lines:
        m = DECISION.search(line)
        if m is None:
            continue
        topic, _, part = m.group("tp").rpartition("-")
        out.append({
            "controller": int(m.group("id")), "epoch": int(m.group("epoch")), "topic": topic, "part": int(part),
            "leader": int(m.group("leader")), "leader_epoch": int(m.group("le")), "zk_version": int(m.group("zkv")),
        })  # fmt: skip
    return out


def controller(made: Iterable[dict[str, Any]], observed: Iterable[dict[str, Any]]) -> list[str]:
    """Decisions of an older controller epoch after a newer one's, a state version decided twice, and
    /controller_epoch going back."""
    by_tp: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    found = []
    for d in made:
        versions = by_tp.setdefault((d["topic"], d["part"]), {})
        other = versions.get(d["zk_version"])
        if other is not None and (other["epoch"], other["leader_epoch"]) != (d["epoch"], d["leader_epoch"]):
            found.append(f"{d['topic']}-{d['part']} version {d['zk_version']} decided twice: {other} and {d}")
        versions[d["zk_version"]] = d
    for (topic, part), versions in sorted(by_tp.items()):
        newest: dict[str, Any] | None = None
        for version in sorted(versions):
            d = versions[version]
            if newest is not None and d["epoch"] < newest["epoch"]:
                found.append(
                    f"{topic}-{part}: controller {d['controller']} of epoch {d['epoch']} wrote version {version} "
                    f"after controller {newest['controller']} of epoch {newest['epoch']} wrote {newest['zk_version']}"
                )
            newest = d if newest is None or d["epoch"] >= newest["epoch"] else newest
    last_epoch = None
    for snap in observed:
        epoch = snap.get("controller_epoch")
        if epoch is None:
            continue
        if last_epoch is not None and epoch < last_epoch:
            found.append(f"/controller_epoch went from {last_epoch} back to {epoch} at {snap['t']:.3f}")
        last_epoch = epoch
    return _limited("controller", found)


def leader_epochs(observed: Iterable[dict[str, Any]]) -> list[str]:
    """A partition's polled leader epoch going back, or one epoch with two leaders."""
    last: dict[str, dict[str, Any]] = {}
    leaders: dict[tuple[str, int], int] = {}
    found = []
    for snap in observed:
        for part, state in snap["states"].items():
            if state is None:
                continue
            before = last.get(part)
            if before is not None and state["leader_epoch"] < before["leader_epoch"]:
                found.append(
                    f"partition {part}: leader epoch {before['leader_epoch']} then {state['leader_epoch']} "
                    f"at {snap['t']:.3f}"
                )
            if before is not None and state["controller_epoch"] < before["controller_epoch"]:
                found.append(
                    f"partition {part}: state written by controller epoch {before['controller_epoch']} then "
                    f"{state['controller_epoch']} at {snap['t']:.3f}"
                )
            key = (part, state["leader_epoch"])
            if leaders.setdefault(key, state["leader"]) != state["leader"]:
                found.append(
                    f"partition {part}: leader epoch {state['leader_epoch']} names leaders {leaders[key]} and "
                    f"{state['leader']} ({snap['t']:.3f})"
                )
            last[part] = state
    return _limited("leader_epochs", found)


def leader_starts(lines_by_broker: dict[int, list[str]]) -> list[str]:
    """Two brokers that took one partition's leadership in one leader epoch, or a broker whose leader epoch
    of a partition went back (each broker's state-change.log, restarts appended, is in its own order)."""
    leaders: dict[tuple[str, int], set[int]] = {}
    found = []
    for broker, lines in sorted(lines_by_broker.items()):
        last: dict[str, int] = {}
        for line in lines:
            m = LEADER_START.search(line)
            if m is None:
                continue
            tp, epoch = m.group("tp"), int(m.group("le"))
            if tp in last and epoch <= last[tp]:
                found.append(f"broker {broker} led {tp} at leader epoch {epoch} after {last[tp]}")
            last[tp] = epoch
            leaders.setdefault((tp, epoch), set()).add(broker)
    for (tp, epoch), brokers in sorted(leaders.items()):
        if len(brokers) > 1:
            found.append(f"{tp}: brokers {sorted(brokers)} each led leader epoch {epoch}")
    return _limited("leader_starts", found)
