"""The follower side of the replication throttle (Kafka's `ReplicationQuotaManager`, KIP-73).

The reassign-partitions tool (`--throttle`) writes

* topic configs `leader.replication.throttled.replicas` and
  `follower.replication.throttled.replicas` in `/config/topics/<t>`: a list
  `partition:broker,...` or `*` (every replica of the topic);
* broker configs `leader.replication.throttled.rate` and
  `follower.replication.throttled.rate` (bytes/s) in `/config/brokers/<id>`
  (or `/config/brokers/<default>` for every broker),

each followed by a `/config/changes` notification. Kafka throttles both ends;
this broker enforces the follower end, which is enough to bound the catch-up
traffic of moving replicas: a partition is throttled here when its topic lists
`(partition, this broker)` (or `*`) as a follower throttled replica and a
follower rate is set. The bytes fetched for throttled partitions drain a
token bucket; while it is in debt the fetcher leaves the throttled partitions
out of its fetches (the others are never slowed), as Kafka's
`ReplicaFetcherThread.shouldFollowerThrottle` does. One fetch of a throttled
partition asks for at most one second's worth of bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.config_changes import ConfigChangeListener
from client.kafka.structs import TopicPartition
from client.kafka.znodes import ZnodeDataError, broker_config_path, decode_config, topic_config_path
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import NoNodeError

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
DEFAULT_BROKER_ENTITY = "<default>"
ALL_REPLICAS = "*"
# The bucket holds at most this many seconds of the rate (the burst a throttled follower may take at once).
BURST_S = 1.0
# A throttled fetch asks for at least this much, so a tiny rate still moves whole batches.
THROTTLED_FETCH_BYTES_MIN = 1024


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """A parsed `*.replication.throttled.replicas` value: every replica, or (partition, broker) pairs."""

    every_replica: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    def contains(self, partition: int, broker_id: int) -> bool:
        return self.every_replica or (partition, broker_id) in self.pairs


NO_THROTTLED_REPLICAS = ThrottledReplicas()


def parse_throttled_replicas(value: str | None) -> ThrottledReplicas:
    """`"*"` or `"0:101,0:102,1:101"` (Kafka's ThrottledReplicaListValidator format); bad entries raise."""
    if value is None or not value.strip():
        return NO_THROTTLED_REPLICAS
    if value.strip() == ALL_REPLICAS:
        return ThrottledReplicas(every_replica=True)
    pairs = set()
    for entry in value.split(","):
        partition, sep, broker = entry.strip().partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"throttled replica entry {entry.strip()!r} is not partition:broker")
        pairs.add((int(partition), int(broker)))
    return ThrottledReplicas(pairs=frozenset(pairs))


def parse_rate(value: str | None) -> float | None:
    """A `*.replication.throttled.rate` in bytes/s; None (unthrottled) when absent."""
    if value is None or not value.strip():
        return None
    rate = float(value)
    if rate <= 0:
        raise ValueError(f"throttled rate must be positive, got {value!r}")
    return rate


class TokenBucket:
    """Bytes allowed at `rate_bytes_per_s`, at most `burst_s` of them saved up; may go into debt."""

    def __init__(self, rate_bytes_per_s: float, now_s: float, burst_s: float = BURST_S) -> None:
        self.rate = rate_bytes_per_s
        self._burst_s = burst_s
        self._tokens = rate_bytes_per_s * burst_s
        self._at = now_s

    def _refill(self, now_s: float) -> None:
        elapsed = max(0.0, now_s - self._at)
        self._tokens = min(self.rate * self._burst_s, self._tokens + elapsed * self.rate)
        self._at = now_s

    def consume(self, nbytes: int, now_s: float) -> None:
        self._refill(now_s)
        self._tokens -= nbytes

    def delay_s(self, now_s: float) -> float:
        """How long until the bucket is out of debt (0 when it is not in debt)."""
        self._refill(now_s)
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class ReplicationThrottle:
    """This broker's follower quota, kept current from the config znodes and `/config/changes`."""

    def __init__(
        self,
        broker_id: int,
        zk: AsyncZkClient | None,
        logger: Any,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._id = broker_id
        self._zk = zk
        self._log = logger
        self._clock = clock
        self._broker_rates: dict[str, float | None] = {}  # broker config entity -> follower rate
        self._topics: dict[str, ThrottledReplicas] = {}
        self._bucket: TokenBucket | None = None
        self._listener: ConfigChangeListener | None = None
        self._started: asyncio.Future[None] | None = None

    # ---- life cycle

    async def ensure_started(self) -> None:
        """Read the broker configs and follow `/config/changes`; once, by whichever fetcher asks first."""
        if self._zk is None:
            return
        if self._started is None:
            self._started = asyncio.ensure_future(self._start(self._zk))
        try:
            await asyncio.shield(self._started)
        except Exception as exc:  # never stop replication over the quota: unthrottled until the next try
            self._log.warning("replication_throttle_start_failed", error=str(exc))
            self._started = None

    async def _start(self, zk: AsyncZkClient) -> None:
        listener = ConfigChangeListener(zk, self.on_topic_config, self._log, on_broker_config=self.on_broker_config)
        await listener.start()
        self._listener = listener
        for entity in (DEFAULT_BROKER_ENTITY, str(self._id)):
            self.on_broker_config(entity, await self._read(broker_config_path(entity)))

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
        if self._started is not None and not self._started.done():
            self._started.cancel()

    async def ensure_topics(self, topics: Iterable[str]) -> None:
        """Read the topic configs not yet known (later changes arrive through `/config/changes`)."""
        if self._zk is None:
            return
        for topic in sorted(set(topics) - set(self._topics)):
            try:
                overrides = await self._read(topic_config_path(topic))
            except Exception as exc:  # the quorum may be briefly unreachable: unthrottled, asked again next fetch
                self._log.warning("throttle_topic_config_read_failed", topic=topic, error=str(exc))
                return
            self.on_topic_config(topic, overrides)

    async def _read(self, path: str) -> dict[str, str]:
        assert self._zk is not None
        try:
            data, _ = await self._zk.get(path)
            return decode_config(data, path)
        except NoNodeError:
            return {}
        except ZnodeDataError as exc:
            self._log.warning("throttle_config_unreadable", path=path, error=str(exc))
            return {}

    # ---- config changes

    def on_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        try:
            replicas = parse_throttled_replicas(overrides.get(FOLLOWER_THROTTLED_REPLICAS))
        except ValueError as exc:
            self._log.warning("throttled_replicas_invalid", topic=topic, error=str(exc))
            replicas = NO_THROTTLED_REPLICAS
        if self._topics.get(topic) != replicas:
            self._log.info(
                "follower_throttled_replicas",
                topic=topic,
                every_replica=replicas.every_replica,
                partitions=sorted(p for p, b in replicas.pairs if b == self._id),
            )
        self._topics[topic] = replicas

    def on_broker_config(self, entity: str, overrides: dict[str, str]) -> None:
        if entity not in (DEFAULT_BROKER_ENTITY, str(self._id)):
            return
        try:
            self._broker_rates[entity] = parse_rate(overrides.get(FOLLOWER_THROTTLED_RATE))
        except ValueError as exc:
            self._log.warning("throttled_rate_invalid", entity=entity, error=str(exc))
            self._broker_rates[entity] = None
        rate = self.rate_bytes_per_s
        if rate is None:
            self._bucket = None
        elif self._bucket is None:
            self._bucket = TokenBucket(rate, self._clock())
        else:
            self._bucket.rate = rate
        self._log.info("follower_replication_throttled_rate", rate_bytes_per_s=rate)

    # ---- the quota (the fetcher asks these)

    @property
    def rate_bytes_per_s(self) -> float | None:
        own = self._broker_rates.get(str(self._id))
        return own if own is not None else self._broker_rates.get(DEFAULT_BROKER_ENTITY)

    def is_throttled(self, tp: TopicPartition) -> bool:
        replicas = self._topics.get(tp.topic)
        return self._bucket is not None and replicas is not None and replicas.contains(tp.partition, self._id)

    def delay_s(self) -> float:
        """0 when throttled partitions may be fetched now, else how long until they may."""
        return 0.0 if self._bucket is None else self._bucket.delay_s(self._clock())

    def fetch_bytes(self, default: int) -> int:
        """The partition max bytes of a throttled partition's fetch."""
        rate = self.rate_bytes_per_s
        if rate is None:
            return default
        return min(default, max(THROTTLED_FETCH_BYTES_MIN, int(rate * BURST_S)))

    def record(self, nbytes: int) -> None:
        if self._bucket is not None and nbytes > 0:
            self._bucket.consume(nbytes, self._clock())
