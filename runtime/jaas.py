"""JAAS login configuration files, as ZooKeeper and Kafka read them for DIGEST-MD5 logins.

A file holds named sections, each one or more login modules (javax.security.auth.login's
ConfigFile syntax):

    Server {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        user_admin="admin-secret"
        user_broker="broker-secret";
    };
    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="broker"
        password="broker-secret";
    };

Kafka's `sasl.jaas.config` property holds one login module in the same syntax (`parse_jaas_config`):

    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";

read by brokers (PLAIN's `user_<name>` table: broker/sasl/plain.py) and by clients (the `username` and
`password` a client logs in with: runtime/client_config.py).

A ZooKeeper server takes its users from the `Server` section (`user_<name>="<password>"`,
ServerCnxnFactory.configureSaslLogin); a ZooKeeper client, Kafka's broker included, logs in with
the `Client` section's username and password (ZooKeeperSaslClient). Java takes the file from the
system property `java.security.auth.login.config`, which operators pass as
`-Djava.security.auth.login.config=FILE` in SERVER_JVMFLAGS (ZooKeeper) or KAFKA_OPTS (Kafka):
`login_config_from_jvm_flags` reads it back from such a string.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LOGIN_CONFIG_PROPERTY",
    "JaasError",
    "JaasModule",
    "digest_client_login",
    "digest_server_users",
    "login_config_from_jvm_flags",
    "optional_client_login",
    "parse_jaas_config",
    "read_jaas_file",
    "sasl_options_from_env",
]

LOGIN_CONFIG_PROPERTY = "java.security.auth.login.config"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
JAAS_FILE_BYTES_MAX = 1 << 20


class JaasError(ValueError):
    """A JAAS file that cannot be used: one line naming the file and the problem."""


@dataclass(frozen=True, slots=True)
class JaasModule:
    class_name: str
    control_flag: str
    options: Mapping[str, str]


_COMMENTS = re.compile(r'//[^\n]*|/\*.*?\*/|("(?:[^"\\]|\\.)*")', re.S)
_SECTION_HEAD = re.compile(r"\s*([A-Za-z0-9_.\-]+)\s*\{")
_MODULE_HEAD = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+([A-Za-z]+)")
_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def _strip_comments(text: str) -> str:
    return _COMMENTS.sub(lambda m: m.group(1) or " ", text)


def parse_jaas(text: str, source: str = "JAAS file") -> dict[str, tuple[JaasModule, ...]]:
    """Every section of a JAAS file by name; JaasError naming `source` when it does not parse."""
    text = _strip_comments(text)
    sections: dict[str, tuple[JaasModule, ...]] = {}
    at = 0
    while text[at:].strip():
        head = _SECTION_HEAD.match(text, at)
        if head is None:
            raise JaasError(f"{source}: expected 'Name {{' at {text[at:].strip()[:30]!r}")
        modules, at = _parse_modules(text, head.end(), source, head.group(1))
        sections[head.group(1)] = modules
    return sections


def _parse_modules(text: str, at: int, source: str, section: str) -> tuple[tuple[JaasModule, ...], int]:
    modules = []
    while True:
        end = re.compile(r"\s*\}\s*;").match(text, at)
        if end is not None:
            return tuple(modules), end.end()
        head = _MODULE_HEAD.match(text, at)
        if head is None:
            raise JaasError(f"{source}: section {section}: expected '<LoginModule> <flag> key=\"value\" ... ;'")
        flag = head.group(2).lower()
        if flag not in CONTROL_FLAGS:
            raise JaasError(
                f"{source}: section {section}: control flag {head.group(2)!r} is not one of {CONTROL_FLAGS}"
            )
        options, at = _options(text, head.end())
        semicolon = re.compile(r"\s*;").match(text, at)
        if semicolon is None:
            raise JaasError(f"{source}: section {section}: expected ';' after the options of {head.group(1)}")
        at = semicolon.end()
        modules.append(JaasModule(head.group(1), flag, options))


def _options(text: str, at: int) -> tuple[dict[str, str], int]:
    """A module's `key="value"` / `key=value` options from `at`; returns them and where they end."""
    options: dict[str, str] = {}
    while (option := _OPTION.match(text, at)) is not None:
        raw = option.group(2) if option.group(2) is not None else option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", raw)
        at = option.end()
    return options, at


def parse_jaas_config(text: str) -> JaasModule:
    """Kafka's `sasl.jaas.config`: one login module, `<class> <flag> key="value" ... ;` (Kafka's JaasConfig)."""
    head = _MODULE_HEAD.match(text)
    if head is None:
        raise JaasError("expected '<LoginModuleClass> <controlFlag> key=\"value\" ... ;'")
    flag = head.group(2).lower()
    if flag not in CONTROL_FLAGS:
        raise JaasError(f"invalid control flag {head.group(2)!r} (one of {', '.join(CONTROL_FLAGS)})")
    options, at = _options(text, head.end())
    rest = text[at:].strip()
    if rest != ";":
        raise JaasError(f"expected key=value options ending with ';' at {rest[:30]!r}")
    return JaasModule(head.group(1), flag, options)


def read_jaas_file(path: Path) -> dict[str, tuple[JaasModule, ...]]:
    try:
        with path.open("rb") as f:
            raw = f.read(JAAS_FILE_BYTES_MAX + 1)
    except OSError as exc:
        raise JaasError(f"{path}: cannot read the JAAS file: {exc.strerror}") from None
    if len(raw) > JAAS_FILE_BYTES_MAX:
        raise JaasError(f"{path}: JAAS file larger than {JAAS_FILE_BYTES_MAX} bytes")
    try:
        return parse_jaas(raw.decode("utf-8"), str(path))
    except UnicodeDecodeError:
        raise JaasError(f"{path}: JAAS file is not UTF-8") from None


def _section(path: Path, name: str) -> tuple[JaasModule, ...]:
    sections = read_jaas_file(path)
    if name not in sections:
        raise JaasError(f"{path}: no '{name}' section (found: {', '.join(sections) or 'none'})")
    return sections[name]


def digest_server_users(path: Path, section: str = "Server") -> dict[str, str]:
    """The `user_<name>` options of the section's modules: the users a ZooKeeper server lets log in."""
    users = {
        key.removeprefix("user_"): value
        for module in _section(path, section)
        for key, value in module.options.items()
        if key.startswith("user_") and len(key) > len("user_")
    }
    if not users:
        raise JaasError(f'{path}: section {section} names no user (user_<name>="<password>")')
    return users


def digest_client_login(path: Path, section: str = "Client") -> tuple[str, str]:
    """The username and password a ZooKeeper client logs in with (the first module giving both)."""
    for module in _section(path, section):
        username, password = module.options.get("username"), module.options.get("password")
        if username and password is not None:
            return username, password
    raise JaasError(f'{path}: section {section} has no module with username="..." and password="..."')


def optional_client_login(path: Path, section: str = "Client") -> tuple[str, str] | None:
    """`digest_client_login`, or None when the file has no such section: a JAAS file made for other logins
    (Kafka's KafkaServer or KafkaClient) means no ZooKeeper login, as JaasUtils.isZkSaslEnabled reads it."""
    if section not in read_jaas_file(path):
        return None
    return digest_client_login(path, section)


def login_config_from_jvm_flags(flags: str) -> Path | None:
    """The file of `-Djava.security.auth.login.config=FILE` in a JVM flags string, or None."""
    try:
        words = shlex.split(flags)
    except ValueError:
        words = flags.split()
    found = None
    prefix = f"-D{LOGIN_CONFIG_PROPERTY}="
    for word in words:
        if word.startswith(prefix) and len(word) > len(prefix):
            found = Path(word[len(prefix) :])  # the last one wins, as in java's own parsing
    return found


def sasl_options_from_env(variable: str) -> dict[str, str] | None:
    """The ZooKeeper SASL login a Java tool would make from its JVM flags in `variable` (KAFKA_OPTS for Kafka's
    tools, CLIENT_JVMFLAGS for zkCli): the Client section's DIGEST-MD5 login as kazoo's sasl_options, None when
    the flags name no JAAS file. JaasError (one line) when the file is unusable."""
    path = login_config_from_jvm_flags(os.environ.get(variable, ""))
    login = optional_client_login(path) if path is not None else None
    if login is None:
        return None
    return {"mechanism": "DIGEST-MD5", "username": login[0], "password": login[1]}
