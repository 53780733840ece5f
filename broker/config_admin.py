"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on any broker (Kafka 2.8 `ZkAdminManager`, ZooKeeper mode).

Both front ends (the Kafka listener's handlers and the gRPC DescribeConfigs / AlterConfigs the SDK calls)
come here. Configs live where `zkraft configs --zookeeper` and Kafka keep them: `/config/topics/<t>` and
`/config/brokers/<id>` (`<default>` for the cluster default), each change followed by a
`/config/changes/config_change_<seq>` notification so every broker applies it (broker/config_changes.py).

Errors are 2.8's, message for message:
* a value a ConfigDef refuses: INVALID_REQUEST, `Invalid config value for resource ConfigResource(type=TOPIC,
  name='t'): Invalid value x for configuration retention.ms: Not a number of type LONG`;
* an unknown topic config name: INVALID_CONFIG, `Unknown topic config name: x`;
* a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION;
* a broker config this broker cannot change while running (all but the replication throttle rates):
  INVALID_REQUEST, `... Cannot update these configs dynamically: Set(log.retention.ms)`, 2.8's answer for its
  static configs (2.8 could change some of them; zkraft's broker reads them at start-up only).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.config import BrokerConfig
from broker.config_describe import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIG_KEYS,
    BrokerConfigLayers,
    ConfigEntry,
    ConfigType,
    ResourceType,
    canonical_value,
    describe_broker_configs,
    describe_topic_configs,
)
from client.kafka import errors
from client.kafka.topic_admin import validate_topic_configs
from client.kafka.znodes import (
    CONFIG_TYPE_BROKER,
    CONFIG_TYPE_TOPIC,
    config_change_create_path,
    config_entity_path,
    decode_config,
    encode_config,
    encode_config_change,
    topic_path,
    validate_topic_name,
)
from client.zk.aio import AsyncZkClient
from client.zk.exceptions import NodeExistsError, NoNodeError, ZkException

DEFAULT_BROKER_ENTITY = "<default>"  # ConfigEntityName.Default


class AlterOp(enum.IntEnum):
    """AlterConfigOp.OpType ids (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigOp:
    name: str
    value: str | None
    op: AlterOp = AlterOp.SET


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int = errors.NONE
    error_message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int = errors.NONE
    error_message: str | None = None


class _ConfigValueError(Exception):
    """A ConfigException: answered as INVALID_REQUEST with the resource named, as 2.8's alterConfigs does."""


def _type_name(resource_type: int) -> str:
    """ConfigResource.Type.forId(id).toString: an id it does not know is UNKNOWN."""
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return "UNKNOWN"


def resource_text(resource_type: int, name: str) -> str:
    """ConfigResource.toString."""
    return f"ConfigResource(type={_type_name(resource_type)}, name='{name}')"


def _scala_set(names: Sequence[str]) -> str:
    return f"Set({', '.join(names)})"


def _error_of(exc: Exception, resource_type: int, name: str) -> tuple[int, str | None]:
    if isinstance(exc, _ConfigValueError):
        return (
            errors.InvalidRequestError.code,
            f"Invalid config value for resource {resource_text(resource_type, name)}: {exc}",
        )
    if isinstance(exc, errors.KafkaError):
        return exc.code, str(exc) if str(exc) != exc.default_message else None
    if isinstance(exc, ZkException):  # Kafka's ZooKeeper calls retry until the request times out
        return errors.RequestTimedOutError.code, f"the quorum did not answer: {exc}"
    return errors.UnknownServerError.code, None  # ApiError.fromThrowable leaks no message for these


class ConfigAdmin:
    def __init__(self, config: BrokerConfig, zk: AsyncZkClient, logger: Any) -> None:
        self.config = config
        self.zk = zk
        self._log = logger

    # ------------------------------------------------------------------ reads

    async def _entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(config_entity_path(entity_type, name))
        except NoNodeError:
            return {}
        return decode_config(data)

    async def broker_layers(self) -> BrokerConfigLayers:
        return BrokerConfigLayers(
            dynamic_broker=await self._entity_config(CONFIG_TYPE_BROKER, str(self.config.broker_id)),
            dynamic_default=await self._entity_config(CONFIG_TYPE_BROKER, DEFAULT_BROKER_ENTITY),
            static=dict(self.config.given),
        )

    async def _require_topic(self, topic: str) -> None:
        validate_topic_name(topic)
        if await self.zk.exists(topic_path(topic)) is None:
            raise errors.UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")

    def _broker_entity(self, name: str, describing: bool) -> str:
        """getBrokerId: this broker's id, or the cluster default for an empty name (2.8's messages differ
        between ConfigHelper's describe and ZkAdminManager's alter)."""
        if not name:
            return DEFAULT_BROKER_ENTITY
        try:
            broker_id = int(name)
        except ValueError:
            raise errors.InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != self.config.broker_id:
            expected = f"{self.config.broker_id} or empty string" if describing else str(self.config.broker_id)
            raise errors.InvalidRequestError(f"Unexpected broker id, expected {expected}, but received {name}")
        return str(self.config.broker_id)

    # ------------------------------------------------------------------ describe

    async def describe(
        self,
        resources: Sequence[tuple[int, str, Sequence[str] | None]],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[DescribeConfigsResult]:
        """One result per (resource type, name, keys or None for all), in request order."""
        results = []
        for resource_type, name, keys in resources:
            try:
                wanted = keys or None  # ConfigHelper: a null or empty key list asks for every config
                entries = await self._describe_one(resource_type, name, wanted, include_synonyms, include_documentation)
                results.append(DescribeConfigsResult(resource_type, name, entries=tuple(entries)))
            except Exception as exc:
                code, message = _error_of(exc, resource_type, name)
                if code == errors.UnknownServerError.code:
                    self._log.error(
                        "describe_configs_failed", resource=resource_text(resource_type, name), error=str(exc)
                    )
                results.append(DescribeConfigsResult(resource_type, name, code, message))
        return results

    async def _describe_one(
        self, resource_type: int, name: str, keys: Sequence[str] | None, synonyms: bool, documentation: bool
    ) -> list[ConfigEntry]:
        if resource_type == ResourceType.TOPIC:
            validate_topic_name(name)
            if await self.zk.exists(topic_path(name)) is None:
                raise errors.UnknownTopicOrPartitionError()  # 2.8 answers the code alone
            overrides = await self._entity_config(CONFIG_TYPE_TOPIC, name)
            layers = await self.broker_layers()
            return describe_topic_configs(overrides, layers, keys, synonyms=synonyms, documentation=documentation)
        if resource_type == ResourceType.BROKER:
            per_broker = self._broker_entity(name, describing=True) != DEFAULT_BROKER_ENTITY
            layers = await self.broker_layers()
            return describe_broker_configs(
                self.config, layers, keys, per_broker=per_broker, synonyms=synonyms, documentation=documentation
            )
        raise errors.InvalidRequestError(f"Unsupported resource type: {_type_name(resource_type)}")

    # ------------------------------------------------------------------ alter

    async def alter(
        self,
        resources: Sequence[tuple[int, str, Sequence[ConfigOp]]],
        *,
        validate_only: bool = False,
        incremental: bool = False,
    ) -> list[AlterConfigsResult]:
        """AlterConfigs (each resource's ops are its whole new config: SET only) or IncrementalAlterConfigs."""
        results = []
        for resource_type, name, ops in resources:
            try:
                await self._alter_one(resource_type, name, ops, validate_only, incremental)
                results.append(AlterConfigsResult(resource_type, name))
            except Exception as exc:
                code, message = _error_of(exc, resource_type, name)
                log = self._log.error if code == errors.UnknownServerError.code else self._log.info
                log("alter_configs_failed", resource=resource_text(resource_type, name), error=str(exc))
                results.append(AlterConfigsResult(resource_type, name, code, message))
        return results

    async def _alter_one(
        self, resource_type: int, name: str, ops: Sequence[ConfigOp], validate_only: bool, incremental: bool
    ) -> None:
        _check_ops(ops, incremental)
        if resource_type == ResourceType.TOPIC:
            await self._require_topic(name)
            current = await self._entity_config(CONFIG_TYPE_TOPIC, name) if incremental else {}
            configs = apply_ops(current, ops, TOPIC_CONFIG_KEYS)
            check_topic_configs(configs)
            entity_type, entity = CONFIG_TYPE_TOPIC, name
        elif resource_type == ResourceType.BROKER:
            entity = self._broker_entity(name, describing=False)
            current = await self._entity_config(CONFIG_TYPE_BROKER, entity) if incremental else {}
            configs = apply_ops(current, ops, {})
            check_dynamic_broker_configs(configs)
            entity_type = CONFIG_TYPE_BROKER
        else:
            kind = _type_name(resource_type)
            raise errors.InvalidRequestError(
                f"AlterConfigs is only supported for topics and brokers, but resource type is {kind}"
            )
        if not validate_only:
            await self._write(entity_type, entity, configs)

    async def _write(self, entity_type: str, entity: str, configs: Mapping[str, str]) -> None:
        """AdminZkClient.changeEntityConfig: the config znode (set or created), then a change notification."""
        path = config_entity_path(entity_type, entity)
        data = encode_config(configs)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            try:
                await self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                await self.zk.set(path, data)
        await self.zk.create(
            config_change_create_path(), encode_config_change(entity_type, entity), sequence=True, makepath=True
        )
        self._log.info("entity_config_changed", entity_type=entity_type, entity=entity, config=dict(configs))


def _check_ops(ops: Sequence[ConfigOp], incremental: bool) -> None:
    """The request-level checks of 2.8's alterConfigs / incrementalAlterConfigs."""
    names = [op.name for op in ops]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise errors.InvalidRequestError(f"Error due to duplicate config keys : {','.join(duplicates)}")
    nulls = [
        f"{op.op.name}:{op.name}" if incremental else op.name
        for op in ops
        if op.value is None and op.op != AlterOp.DELETE
    ]
    if nulls:
        raise errors.InvalidRequestError(f"Null value not supported for : {','.join(nulls)}")


def apply_ops(current: Mapping[str, str], ops: Sequence[ConfigOp], keys: Mapping[str, Any]) -> dict[str, str]:
    """ZkAdminManager.prepareIncrementalConfigs: SET, DELETE, and APPEND / SUBTRACT on LIST configs (each starting
    from the current value, else the default; APPEND keeps a repeated item, as 2.8 does). Unlike 2.8, an empty
    default yields no empty list element (2.8 appends "0:1" to the throttled replicas' "" as ",0:1")."""
    configs = dict(current)
    for op in ops:
        if op.op == AlterOp.SET:
            configs[op.name] = op.value or ""
        elif op.op == AlterOp.DELETE:
            configs.pop(op.name, None)
        else:
            key = keys.get(op.name)
            if key is None:
                raise errors.InvalidConfigurationError(f"Unknown topic config name: {op.name}")
            if key.config_type != ConfigType.LIST:
                verb = "append" if op.op == AlterOp.APPEND else "subtract"
                raise errors.InvalidRequestError(f"Config value {verb} is not allowed for config key: {op.name}")
            old = configs.get(op.name)
            if old is None:
                old = "delete" if op.name == "cleanup.policy" else ""  # LogConfig's list defaults
            old_items = [item for item in old.split(",") if item]
            given = [item for item in (op.value or "").split(",") if item]
            if op.op == AlterOp.APPEND:
                merged = old_items + given
            else:
                merged = [item for item in old_items if item not in given]
            configs[op.name] = ",".join(merged)
    return configs


def check_topic_configs(configs: Mapping[str, str]) -> None:
    """LogConfig.validate with 2.8's split of errors: an unknown name is INVALID_CONFIG, a bad value is a
    ConfigException (INVALID_REQUEST naming the resource)."""
    for name in configs:
        if name not in TOPIC_CONFIG_KEYS:
            raise errors.InvalidConfigurationError(f"Unknown topic config name: {name}")
    try:
        validate_topic_configs(configs)
    except errors.InvalidConfigurationError as exc:
        if str(exc).startswith("Invalid value"):
            raise _ConfigValueError(str(exc)) from None
        raise


def check_dynamic_broker_configs(configs: Mapping[str, str]) -> None:
    """DynamicBrokerConfig.validate for the configs this broker applies while running: the throttle rates,
    each a LONG of at least 0 (DynamicConfig.Broker)."""
    static = [name for name in configs if name not in DYNAMIC_BROKER_CONFIGS]
    if static:
        raise _ConfigValueError(f"Cannot update these configs dynamically: {_scala_set(static)}")
    for name, value in configs.items():
        try:
            rate = canonical_value(value, ConfigType.LONG)
        except ValueError:
            raise _ConfigValueError(
                f"Invalid value {value} for configuration {name}: Not a number of type LONG"
            ) from None
        if rate is not None and int(rate) < 0:
            raise _ConfigValueError(f"Invalid value {rate} for configuration {name}: Value must be at least 0")
