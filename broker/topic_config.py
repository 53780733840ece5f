"""A partition's LogConfig: the broker's `log.*` defaults with the topic's `/config/topics/<t>` overrides.

Kafka's precedence (2.x `LogConfig.fromProps`): a topic-level name
(`retention.ms`, `cleanup.policy`, ...) wins over the broker default it
shadows (`log.retention.ms`/`log.retention.hours`, `log.cleanup.policy`, ...).
Values were validated when they were written (client/kafka/topic_admin.py), so a
bad one here is a hand-edited znode: it is skipped with a log line rather
than failing the partition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.config import BrokerConfig
from broker.log import LogConfig
from client.kafka.batch_rewrite import TOPIC_CODECS


def _int(text: str) -> int:
    return int(text.strip())


def _compression_type(text: str) -> str:
    value = text.strip().lower()
    if value not in TOPIC_CODECS:
        raise ValueError(text)
    return value


def _timestamp_type(text: str) -> str:
    value = text.strip()
    if value not in ("CreateTime", "LogAppendTime"):
        raise ValueError(text)
    return value


def _policy(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


# topic config name -> (LogConfig field, parser, broker default)
_TOPIC_CONFIGS: dict[str, tuple[str, Callable[[str], Any], Callable[[BrokerConfig], Any]]] = {
    "segment.bytes": ("segment_bytes", _int, lambda c: c.log_segment_bytes),
    "segment.ms": ("segment_ms", _int, lambda c: c.segment_ms),
    "index.interval.bytes": ("index_interval_bytes", _int, lambda c: c.log_index_interval_bytes),
    "max.message.bytes": ("max_message_bytes", _int, lambda c: c.message_max_bytes),
    "flush.messages": ("flush_interval_messages", _int, lambda c: c.log_flush_interval_messages),
    "flush.ms": ("flush_interval_ms", _int, lambda c: c.log_flush_interval_ms),
    "retention.ms": ("retention_ms", _int, lambda c: c.retention_ms),
    "retention.bytes": ("retention_bytes", _int, lambda c: c.log_retention_bytes),
    "cleanup.policy": ("cleanup_policy", _policy, lambda c: c.log_cleanup_policy),
    "delete.retention.ms": ("delete_retention_ms", _int, lambda c: c.log_cleaner_delete_retention_ms),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float, lambda c: c.log_cleaner_min_cleanable_ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int, lambda c: c.log_cleaner_min_compaction_lag_ms),
    "compression.type": ("compression_type", _compression_type, lambda c: c.compression_type),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type, lambda c: c.log_message_timestamp_type),
    "message.timestamp.difference.max.ms": (
        "message_timestamp_difference_max_ms",
        _int,
        lambda c: c.log_message_timestamp_difference_max_ms,
    ),
}


def log_config_for(config: BrokerConfig, overrides: Mapping[str, str], logger: Any = None) -> LogConfig:
    values: dict[str, Any] = {}
    for name, (field_name, parse, default) in _TOPIC_CONFIGS.items():
        value = default(config)
        raw = overrides.get(name)
        if raw is not None:
            try:
                value = parse(raw)
            except ValueError:
                if logger is not None:
                    logger.warning("topic_config_value_skipped", config=name, value=raw)
        values[field_name] = value
    return LogConfig(**values)
