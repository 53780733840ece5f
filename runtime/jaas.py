"""A JAAS config as Kafka's `sasl.jaas.config` property holds it: one login module and its options.

    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";

Read by brokers (PLAIN's `user_<name>` table: broker/sasl/plain.py) and by clients (the `username` and `password`
a client logs in with: runtime/client_config.py), with Kafka's JaasConfig syntax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

JAAS_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_HEAD = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(\w+)")
_JAAS_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class JaasConfigError(ValueError):
    """A JAAS config that does not parse: one line saying where."""


@dataclass(frozen=True, slots=True)
class JaasLoginModule:
    class_name: str
    control_flag: str
    options: Mapping[str, str]


def parse_jaas_config(text: str) -> JaasLoginModule:
    """One login module: `<class> <flag> key="value" ... ;` (Kafka's JaasConfig parser, one module per property)."""
    head = _JAAS_HEAD.match(text)
    if head is None:
        raise JaasConfigError("expected '<LoginModuleClass> <controlFlag> key=\"value\" ... ;'")
    if head.group(2).lower() not in JAAS_CONTROL_FLAGS:
        raise JaasConfigError(f"invalid control flag {head.group(2)!r} (one of {', '.join(JAAS_CONTROL_FLAGS)})")
    options: dict[str, str] = {}
    position = head.end()
    while True:
        option = _JAAS_OPTION.match(text, position)
        if option is None:
            break
        value = option.group(2) if option.group(2) is not None else option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", value)
        position = option.end()
    rest = text[position:].strip()
    if rest != ";":
        raise JaasConfigError(f"expected key=value options ending with ';' at {rest[:30]!r}")
    return JaasLoginModule(head.group(1), head.group(2).lower(), options)
