"""A checker for produce/consume histories: lost, duplicated and reordered records (Jepsen's Kafka queue check).

Every produced value is unique and says who sent it and in which order:
`make_value(producer, seq)` → b"<producer>:<seq>", with `seq` increasing in
send order for that producer (across all partitions it sends to, so it also
increases within each partition). The history is:

* `acked`: what the producer was told was written — (partition, offset, value)
  for every future that succeeded (docs/research/kafka.md §7.3: with acks=all,
  min.insync.replicas ≥ 2 and clean elections, none of these may vanish);
* `read`: per partition, what a consumer read from offset 0 up to the end, as
  (offset, value) in read order.

`check(acked, read)` reports

* lost: acknowledged but not read back in the partition it was acknowledged in;
* duplicated: a value read more than once (within a partition or across them);
* reordered: within a partition, a producer's value read after one it sent
  later (first occurrences compared; a duplicate alone is not a reordering);
* moved: acknowledged at one offset but read at another (an acknowledged
  offset was rewritten: a truncation below what was acknowledged);
* unexpected: read values that are not of the `make_value` form.

The checker is pure: no clocks, no I/O; `Report.summary()` is a one-line
account for assertion messages, `Report.ok` is true when lost, duplicated and
reordered are all empty (moved records are also lost or duplicated, or, if
neither, reported on their own: they fail `ok` too).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# How many examples of each anomaly the summary names.
SUMMARY_EXAMPLES_MAX = 5


def make_value(producer: str, seq: int) -> bytes:
    """A unique value that records its producer and its place in that producer's send order."""
    if ":" in producer:
        raise ValueError(f"producer name must not contain ':', got {producer!r}")
    return f"{producer}:{seq}".encode()


def parse_value(value: bytes) -> tuple[str, int] | None:
    """(producer, seq) of a `make_value` value, None for anything else."""
    try:
        producer, _, seq = value.decode().rpartition(":")
        return (producer, int(seq)) if producer else None
    except (UnicodeDecodeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Reordering:
    partition: int
    producer: str
    earlier_seq: int  # sent earlier ...
    later_seq: int  # ... but read after this one, sent later
    offset: int  # where the earlier-sent value was read


@dataclass(frozen=True, slots=True)
class Report:
    acked: int
    read: int
    lost: tuple[tuple[int, int, bytes], ...] = ()  # (partition, acked offset, value)
    duplicated: tuple[tuple[bytes, int], ...] = ()  # (value, times read)
    reordered: tuple[Reordering, ...] = ()
    moved: tuple[tuple[int, int, int, bytes], ...] = ()  # (partition, acked offset, read offset, value)
    unexpected: tuple[tuple[int, int, bytes], ...] = ()  # (partition, offset, value)
    per_partition_read: Mapping[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.moved)

    def counts(self) -> dict[str, int]:
        return {
            "acked": self.acked,
            "read": self.read,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "reordered": len(self.reordered),
            "moved": len(self.moved),
            "unexpected": len(self.unexpected),
        }

    def summary(self) -> str:
        parts = [", ".join(f"{k}={v}" for k, v in self.counts().items())]
        for name in ("lost", "duplicated", "reordered", "moved", "unexpected"):
            items = getattr(self, name)
            if items:
                parts.append(f"{name} e.g. {list(items[:SUMMARY_EXAMPLES_MAX])}")
        return "; ".join(parts)


def check(acked: Iterable[tuple[int, int, bytes]], read: Mapping[int, Sequence[tuple[int, bytes]]]) -> Report:
    acked = list(acked)
    read_at: dict[tuple[int, bytes], list[int]] = defaultdict(list)  # (partition, value) -> offsets read
    times_read: Counter[bytes] = Counter()
    unexpected: list[tuple[int, int, bytes]] = []
    reordered: list[Reordering] = []
    for partition in sorted(read):
        latest: dict[str, int] = {}  # producer -> highest seq read so far in this partition
        seen: set[bytes] = set()
        for offset, value in read[partition]:
            read_at[(partition, value)].append(offset)
            times_read[value] += 1
            parsed = parse_value(value)
            if parsed is None:
                unexpected.append((partition, offset, value))
                continue
            if value in seen:
                continue  # a duplicate: counted as such, not as a reordering
            seen.add(value)
            producer, seq = parsed
            highest = latest.get(producer)
            if highest is not None and seq < highest:
                reordered.append(Reordering(partition, producer, seq, highest, offset))
            else:
                latest[producer] = seq
    lost = []
    moved = []
    for partition, offset, value in acked:
        offsets = read_at.get((partition, value))
        if not offsets:
            lost.append((partition, offset, value))
        elif offset not in offsets:
            moved.append((partition, offset, offsets[0], value))
    duplicated = sorted((value, n) for value, n in times_read.items() if n > 1)
    return Report(
        acked=len(acked),
        read=sum(len(r) for r in read.values()),
        lost=tuple(sorted(lost)),
        duplicated=tuple(duplicated),
        reordered=tuple(reordered),
        moved=tuple(sorted(moved)),
        unexpected=tuple(unexpected),
        per_partition_read={p: len(r) for p, r in read.items()},
    )
