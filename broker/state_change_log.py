"""`state-change.log` in Kafka 2.x's format (docs/research/kafka.md §2.18).

    [2026-11-21 12:53:03,123] INFO [Controller id=1 epoch=3] Changed partition t-0 from NewPartition to
    OnlinePartition with state LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0)
    (state.change.logger)

(one line in the file). The layout is log4j's `[%d] %p %m (%c)%n` with `%d` = ISO8601 in local time
(`yyyy-MM-dd HH:mm:ss,SSS`) and the 1.1+ prefixes of `StateChangeLogger.scala`, so Kafka's
`StateChangeLogMerger` and people's grep habits work on our files.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from broker.controller.election import LeaderAndIsr

LOGGER_NAME = "state.change.logger"
# log4j levels in increasing severity; lines below the threshold are not written.
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")


def scala_list(values: Iterable[int]) -> str:
    """`List(1, 2)`: how Scala prints a List, as Kafka's messages embed it."""
    return f"List({', '.join(str(v) for v in values)})"


def leader_and_isr_text(state: LeaderAndIsr) -> str:
    """K28 `LeaderAndIsr.toString`."""
    return (
        f"LeaderAndIsr(leader={state.leader}, leaderEpoch={state.leader_epoch}, "
        f"isr={scala_list(state.isr)}, zkVersion={state.zk_version})"
    )


def leader_isr_and_epoch_text(state: LeaderAndIsr) -> str:
    """K28 `LeaderIsrAndControllerEpoch.toString`, used by the replica state machine's messages."""
    isr = ",".join(map(str, state.isr))
    return (
        f"(Leader:{state.leader},ISR:{isr},LeaderEpoch:{state.leader_epoch},ControllerEpoch:{state.controller_epoch})"
    )


def _java_list(values: Iterable[int]) -> str:
    return f"[{', '.join(str(v) for v in values)}]"


def leader_and_isr_partition_text(ps: Any) -> str:
    """Kafka 2.4+'s generated `LeaderAndIsrPartitionState.toString` for a broker_pb2 partition state."""
    return (
        f"LeaderAndIsrPartitionState(topicName='{ps.topic_name}', partitionIndex={ps.partition_index}, "
        f"controllerEpoch={ps.controller_epoch}, leader={ps.leader}, leaderEpoch={ps.leader_epoch}, "
        f"isr={_java_list(ps.isr)}, zkVersion={ps.zk_version}, replicas={_java_list(ps.replicas)}, "
        f"addingReplicas={_java_list(ps.adding_replicas)}, removingReplicas={_java_list(ps.removing_replicas)}, "
        f"isNew={str(ps.is_new).lower()})"
    )


def update_metadata_partition_text(ps: Any) -> str:
    """Kafka 2.4+'s generated `UpdateMetadataPartitionState.toString`."""
    return (
        f"UpdateMetadataPartitionState(topicName='{ps.topic_name}', partitionIndex={ps.partition_index}, "
        f"controllerEpoch={ps.controller_epoch}, leader={ps.leader}, leaderEpoch={ps.leader_epoch}, "
        f"isr={_java_list(ps.isr)}, zkVersion={ps.zk_version}, replicas={_java_list(ps.replicas)}, "
        f"offlineReplicas={_java_list(ps.offline_replicas)})"
    )


def log_sent_request(log: StateChangeLogger, epoch: int, broker_id: int, request: Any) -> None:
    """The controller's lines for a request it sends (Kafka's ControllerChannelManager.sendRequestsToBrokers)."""
    kind = type(request).__name__
    if kind == "LeaderAndIsrRequest":
        for ps in request.partition_states:
            role = "become-leader" if ps.leader == broker_id else "become-follower"
            log.controller(
                epoch,
                f"Sending {role} LeaderAndIsr request {leader_and_isr_partition_text(ps)} to broker {broker_id} "
                f"for partition {ps.topic_name}-{ps.partition_index}",
                level="TRACE",
            )
    elif kind == "UpdateMetadataRequest":
        for ps in request.partition_states:
            log.controller(
                epoch,
                f"Sending UpdateMetadata request {update_metadata_partition_text(ps)} to brokers Set({broker_id}) "
                f"for partition {ps.topic_name}-{ps.partition_index}",
                level="TRACE",
            )
    elif kind == "StopReplicaRequest":
        for p in request.partitions:
            log.controller(
                epoch,
                f"Sending StopReplica request (delete = {str(p.delete_partition).lower()}) to broker {broker_id} "
                f"for partition {p.topic_name}-{p.partition_index}",
                level="TRACE",
            )


def log4j_timestamp(epoch_s: float) -> str:
    """log4j ISO8601 (`%d`): local time, comma before the milliseconds."""
    whole = int(epoch_s)
    millis = int(round((epoch_s - whole) * 1000))
    if millis == 1000:
        whole, millis = whole + 1, 0
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(whole))},{millis:03d}"


class StateChangeLogger:
    """Appends Kafka-format lines to `path`; one instance per broker process.

    Writes are synchronous and flushed per line: the lines are few (one per
    state transition) and must survive a SIGKILL, like log4j's appender.
    The lock only guards against a second thread (the sync client's
    callback thread); on one event loop it is never contended.
    """

    def __init__(
        self,
        path: Path,
        broker_id: int,
        *,
        level: str = "TRACE",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if level not in LEVELS:
            raise ValueError(f"state change log level {level!r} is not one of {', '.join(LEVELS)}")
        self.path = Path(path)
        self.broker_id = broker_id
        self._threshold = LEVELS.index(level)
        self._clock = clock
        self._lock = threading.Lock()
        self._file: TextIO | None = None

    def controller(self, epoch: int, message: str, level: str = "INFO") -> None:
        """A line from the controller: `[Controller id=<id> epoch=<e>] <message>`."""
        self._write(level, f"[Controller id={self.broker_id} epoch={epoch}] {message}")

    def broker(self, message: str, level: str = "INFO") -> None:
        """A line from the broker side (LeaderAndIsr handling): `[Broker id=<id>] <message>`."""
        self._write(level, f"[Broker id={self.broker_id}] {message}")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _write(self, level: str, text: str) -> None:
        if LEVELS.index(level) < self._threshold:
            return
        line = f"[{log4j_timestamp(self._clock())}] {level} {text} ({LOGGER_NAME})\n"
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(line)
            self._file.flush()
