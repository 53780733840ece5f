"""Errors of partition log storage.

The ones a client can cause carry the Kafka error code they map to, taken
from client.kafka.errors (the one table of Kafka codes), so the broker
service can turn them into a response code.
"""

from __future__ import annotations

from client.kafka import errors as kafka_errors


class LogError(Exception):
    """Base of the errors raised by `broker.log`."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR
    retriable: bool = False


class OffsetOutOfRangeError(LogError):
    """A read asked for an offset below the log start offset or beyond the log end offset."""

    error_code = kafka_errors.OffsetOutOfRangeError.code

    def __init__(self, partition: str, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range for {partition}: "
            f"log start offset {log_start_offset}, log end offset {log_end_offset}"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogError):
    """One batch is larger than `max.message.bytes`."""

    error_code = kafka_errors.MessageSizeTooLargeError.code


class RecordBatchTooLargeError(LogError):
    """A produce request's batches together exceed `segment.bytes` (they could never fit one segment)."""

    error_code = kafka_errors.RecordListTooLargeError.code


class CheckpointFileError(LogError):
    """A checkpoint file is malformed (wrong version, wrong count, bad line); the message names the file."""


class InvariantViolation(AssertionError):
    """An always-on check failed: the log's state is inconsistent (a bug)."""


def invariant(condition: bool, message: str) -> None:
    """Always-on assertion; `assert` is stripped under -O (STYLE 10)."""
    if not condition:
        raise InvariantViolation(message)


class InvalidTimestampError(LogError):
    """A CreateTime batch's timestamp is further from the append time than `message.timestamp.difference.max.ms`."""

    error_code = kafka_errors.InvalidTimestampError.code


class KafkaStorageError(LogError):
    """A write or fsync in a log directory failed (Kafka's KafkaStorageException): the directory is offline,
    and what the failed call wrote is in an unknown state (broker.log.dir_failure)."""

    error_code = kafka_errors.KafkaStorageError.code
    retriable = True
