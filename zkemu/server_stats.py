"""What the four-letter words report about a node's client connections (ZooKeeper's ServerStats and
the per-connection figures of `cons`): packets received and sent, request latency (also by reads and
updates, ZooKeeper's readlatency and updatelatency: zkemu.latency_summaries), and each connection's
session.

The ZooKeeper wire front end keeps these up to date (one `ConnectionStats` per client connection);
zkemu.four_letter_words reads them. Counting is a few integer additions per request: the figures are
kept whether or not anyone asks for them, as ZooKeeper keeps them.
"""

from __future__ import annotations

import time

from quorum.facade import WAL_FSYNC
from runtime.latency_histogram import LatencyHistogram
from zkemu.latency_summaries import MNTR_SUMMARIES, UPDATE_OPERATIONS, MntrCounter


class LatencyFigures:
    """min/avg/max request latency in ms, as `srvr` prints them (ServerStats.getMinLatency...)."""

    __slots__ = ("count", "total_ms", "min_ms", "max_ms")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        self.min_ms = 0.0
        self.max_ms = 0.0

    def record(self, latency_ms: float) -> None:
        if self.count == 0 or latency_ms < self.min_ms:
            self.min_ms = latency_ms
        if latency_ms > self.max_ms:
            self.max_ms = latency_ms
        self.count += 1
        self.total_ms += latency_ms

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0


class ConnectionStats:
    """One client connection (ZooKeeper's ServerCnxn figures that `cons` lists and `crst` resets)."""

    __slots__ = (
        "remote",
        "session_id",
        "timeout_ms",
        "established_ms",
        "packets_received",
        "packets_sent",
        "last_zxid",
        "last_operation",
        "last_response_ms",
        "last_latency_ms",
        "latency",
        "server",
    )

    def __init__(self, server: ServerStats, remote: str) -> None:
        self.server = server
        self.remote = remote  # "host:port" of the client
        self.session_id = 0  # 0 until the handshake is done
        self.timeout_ms = 0
        self.established_ms = int(time.time() * 1000)
        self.packets_received = 0
        self.packets_sent = 0
        self.last_zxid = -1
        self.last_operation = "NA"
        self.last_response_ms = 0  # the monotonic clock's ms at the last reply (`cons` lresp), 0: none yet
        self.last_latency_ms = 0.0
        self.latency = LatencyFigures()

    def received(self, packets: int = 1) -> None:
        self.packets_received += packets
        self.server.packets_received += packets

    def sent(self, packets: int = 1) -> None:
        self.packets_sent += packets
        self.server.packets_sent += packets

    def answered(self, operation: str, zxid: int, latency_ms: float) -> None:
        """A reply left for a request named `operation` (ZooKeeper's op names: CREA, GETD, ...).

        The wire front end's hot path: a few attribute updates, no clock read (the sink sets
        `last_response_ms` once per socket write) and one method call, the read or update histogram's
        observe (ServerStats.updateLatency's READ_LATENCY / UPDATE_LATENCY), about 0.2-0.4 µs."""
        self.last_operation = operation
        self.last_zxid = zxid
        self.last_latency_ms = latency_ms
        mine = self.latency
        if latency_ms > mine.max_ms:
            mine.max_ms = latency_ms
        if latency_ms < mine.min_ms or not mine.count:
            mine.min_ms = latency_ms
        mine.count += 1
        mine.total_ms += latency_ms
        server = self.server
        node = server.latency
        if latency_ms > node.max_ms:
            node.max_ms = latency_ms
        if latency_ms < node.min_ms or not node.count:
            node.min_ms = latency_ms
        node.count += 1
        node.total_ms += latency_ms
        (server.update_latency if operation in UPDATE_OPERATIONS else server.read_latency).observe(latency_ms)

    def reset(self) -> None:
        self.packets_received = 0
        self.packets_sent = 0
        self.last_zxid = -1
        self.last_operation = "NA"
        self.last_response_ms = 0
        self.last_latency_ms = 0.0
        self.latency.reset()


class ServerStats:
    """The node's figures over all client connections (`srvr`, `stat`, `mntr`; `srst` resets)."""

    def __init__(self) -> None:
        self.started_s = time.monotonic()  # mntr's zk_uptime counts from here (ServerStats.startTime)
        self.packets_received = 0
        self.packets_sent = 0
        self.latency = LatencyFigures()
        self.read_latency = LatencyHistogram(unit_s=1e-3)
        self.update_latency = LatencyHistogram(unit_s=1e-3)
        histograms = {"fsynctime": WAL_FSYNC, "updatelatency": self.update_latency, "readlatency": self.read_latency}
        self.latency_summaries = tuple(
            MntrCounter(name, histograms[name], advanced) for name, advanced in MNTR_SUMMARIES
        )
        self.connections: dict[int, ConnectionStats] = {}  # id(stats) -> stats, in the order opened

    def connection_opened(self, remote: str) -> ConnectionStats:
        stats = ConnectionStats(self, remote)
        self.connections[id(stats)] = stats
        return stats

    def connection_closed(self, stats: ConnectionStats) -> None:
        self.connections.pop(id(stats), None)

    def reset(self) -> None:
        self.packets_received = 0
        self.packets_sent = 0
        self.latency.reset()
        for summary in self.latency_summaries:
            summary.reset()  # ServerStats.reset: ServerMetrics.resetAll (mntr's figures; /metrics never resets)

    def reset_connections(self) -> None:
        for stats in self.connections.values():
            stats.reset()
