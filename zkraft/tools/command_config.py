"""`--command-config client.properties`, as Kafka's tools take it: the client's TLS and SASL from Kafka's names.

Kafka's admin tools (kafka-topics, kafka-configs, kafka-consumer-groups, ...) read security settings from
this file (`security.protocol=SASL_SSL`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.location`,
`ssl.truststore.type=PEM`, ...); the console and perf tools read the same names from their producer/consumer
properties. Both come here and leave as the SDK's `tls=` (a runtime.tls.TlsConfig) and `sasl=` (a
runtime.client_config.SaslCredentials) keywords, left out when plaintext or without a login.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.client_config import kafka_client_security, kafka_zookeeper_tls, read_config_file
from runtime.tls import TlsConfig, TlsConfigError

# The client properties that say how to connect, not what to do: the console tools take them from their
# producer/consumer properties and hand them here instead of to the Producer's keywords.
SECURITY_PREFIXES = ("security.protocol", "ssl.", "sasl.")


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties: security.protocol=SASL_SSL, sasl.mechanism, sasl.jaas.config, "
        "ssl.truststore.location, ssl.keystore.location (PEM)",
    )


def security_of(ns: argparse.Namespace, attribute: str = "command_config") -> dict[str, Any]:
    """The SDK keywords (`tls`, `sasl`) of `--command-config` (or the tool's own flag for it); ToolUsageError,
    one line, when the file or a property is wrong."""
    from zkraft.tools.topics import ToolUsageError

    path = getattr(ns, attribute, None)
    if path is None:
        return {}
    flag = "--" + attribute.replace("_", "-") if attribute == "command_config" else "--admin.config"
    try:
        return _security_keywords(read_config_file(Path(path)))
    except TlsConfigError as error:
        raise ToolUsageError(f"{flag}: {error}") from None


def _security_keywords(properties: Mapping[str, str]) -> dict[str, Any]:
    return kafka_client_security(properties)


def add_zk_tls_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zk-tls-config-file",
        type=Path,
        metavar="FILE",
        help="TLS to the quorum for --zookeeper: zookeeper.ssl.client.enable=true and zookeeper.ssl.* (Kafka's names)",
    )


def zk_tls_of(path: Path | None) -> TlsConfig | None:
    """The TLS of `--zk-tls-config-file` (ToolUsageError, one line, when the file or a property is wrong)."""
    from zkraft.tools.topics import ToolUsageError

    try:
        return None if path is None else kafka_zookeeper_tls(read_config_file(Path(path)))
    except TlsConfigError as error:
        raise ToolUsageError(f"--zk-tls-config-file: {error}") from None


def split_security(properties: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(security properties, the rest) of a producer's or consumer's properties."""
    security = {k: v for k, v in properties.items() if k.startswith(SECURITY_PREFIXES)}
    return security, {k: v for k, v in properties.items() if k not in security}


def security_of_properties(properties: Mapping[str, str], where: str) -> dict[str, Any]:
    """The SDK keywords (`tls`, `sasl`) of a producer's or consumer's security properties."""
    from zkraft.tools.topics import ToolUsageError

    try:
        return _security_keywords(properties)
    except TlsConfigError as error:
        raise ToolUsageError(f"{where}: {error}") from None
