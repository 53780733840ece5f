"""Config resources for `Admin.describe_configs` / `alter_configs` (kafka-python's `ConfigResource` shape).

    Admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")])
        -> [ConfigDescription(resource_type=TOPIC, name="t", entries={"retention.ms": ConfigEntry(...), ...})]
    Admin.alter_configs([ConfigResource("TOPIC", "t", configs={"retention.ms": "1000"})])
    Admin.incremental_alter_configs(
        [ConfigResource("TOPIC", "t", operations=[AlterConfigOp("retention.ms", None, "DELETE")])]
    )

As in kafka-python, a resource type may be given as the enum or its name ("TOPIC", "BROKER"). An entry's
`source` is Kafka's ConfigSource name (DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ...),
as the Java AdminClient names them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from client.kafka.client_errors import KafkaConfigurationError


class ConfigResourceType(enum.IntEnum):
    """ConfigResource.Type wire ids (kafka-python's ConfigResourceType)."""

    TOPIC = 2
    BROKER = 4


# DescribeConfigsResponse.ConfigSource ids -> the Java AdminClient's ConfigEntry.ConfigSource names.
CONFIG_SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
ALTER_OPERATIONS = ("SET", "DELETE", "APPEND", "SUBTRACT")  # AlterConfigOp.OpType, by id


class AlterConfigOp(NamedTuple):
    """One IncrementalAlterConfigs operation: SET name=value, DELETE name, APPEND / SUBTRACT list items."""

    name: str
    value: str | None
    op: str = "SET"


@dataclass(frozen=True)
class ConfigResource:
    """A topic or broker and, for `alter_configs`, its whole new config (`configs`) or, for
    `incremental_alter_configs`, its `operations`. A broker's name is its id; "" is the cluster default."""

    resource_type: ConfigResourceType | str | int
    name: str
    configs: Mapping[str, str] | None = None
    operations: Sequence[AlterConfigOp] = field(default=())

    @property
    def type_id(self) -> int:
        kind = self.resource_type
        try:
            if isinstance(kind, str):
                return int(ConfigResourceType[kind.upper()])
            return int(ConfigResourceType(int(kind)))
        except (KeyError, ValueError):
            raise KafkaConfigurationError(f"resource type must be TOPIC or BROKER, got {kind!r}") from None


class ConfigSynonym(NamedTuple):
    name: str
    value: str | None
    source: str


class ConfigEntry(NamedTuple):
    """One config as DescribeConfigs describes it (the Java AdminClient's ConfigEntry)."""

    name: str
    value: str | None
    source: str
    is_default: bool  # source is DEFAULT_CONFIG
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    resource_type: ConfigResourceType
    name: str
    entries: dict[str, ConfigEntry]

    def non_default(self) -> dict[str, str | None]:
        """The configs that are not Kafka's defaults: what `kafka-topics --describe` prints as Configs."""
        return {n: e.value for n, e in self.entries.items() if not e.is_default}
