"""Kafka's errors as its Java tools print them: `org.apache.kafka.common.errors.<Name>Exception: <message>`."""

from __future__ import annotations

from client.kafka.errors import KafkaError

JAVA_ERRORS_PACKAGE = "org.apache.kafka.common.errors"


def java_exception_name(error: KafkaError) -> str:
    """OFFSET_OUT_OF_RANGE -> org.apache.kafka.common.errors.OffsetOutOfRangeException (Kafka's Errors table)."""
    words = error.name.removesuffix("_EXCEPTION").split("_")
    return f"{JAVA_ERRORS_PACKAGE}.{''.join(w.capitalize() for w in words)}Exception"


def java_exception_text(error: KafkaError) -> str:
    """What Java's Throwable.toString prints: the class name, then `: message` when there is one."""
    message = " ".join(str(error).split())
    return f"{java_exception_name(error)}: {message}" if message else java_exception_name(error)
