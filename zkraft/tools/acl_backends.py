"""Where `zkraft acls` reads and writes ACLs, as kafka-acls.sh 2.8 has two ways:

* `KafkaProtocolAcls` (`--bootstrap-server`): CreateAcls, DescribeAcls and DeleteAcls over Kafka's binary protocol
  to the first broker that answers, as the AdminClient sends them; the broker's authorizer checks the caller
  (Alter or Describe on the Cluster) and writes the znodes. With `--command-config` the connection is TLS
  (`security.protocol=SSL|SASL_SSL`) and logs in (SaslHandshake v1 + SaslAuthenticate, SCRAM or PLAIN) first.
* `ZooKeeperAcls` (`--authorizer-properties zookeeper.connect=...`): the znodes directly, as the 2.8 tool runs an
  AclAuthorizer in its own process (change notifications included, so running brokers follow).

Both offer `create(bindings)`, `describe(filter)` and `delete(filters)`, and raise AclToolError with the broker's or
the quorum's message in one line.
"""

from __future__ import annotations

import asyncio
import io
import socket
import ssl
import struct
import typing
from collections.abc import Iterable
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from broker.authorizer.zk_store import AclStoreError, add_bindings, load_all_acls, remove_bindings
from client.kafka import errors
from client.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_problem,
)
from client.kafka.scram import ScramClientExchange, ScramCredentialError

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
ACL_VERSIONS = range(1, 4)  # what kio (and so this client) encodes: v0 predates pattern types
CLIENT_ID = "zkraft-acls"
FRAME_BYTES_MAX = 100 * 1024 * 1024


class AclToolError(Exception):
    """The operation failed; the message is one line naming why."""


class KafkaProtocolAcls:
    def __init__(self, bootstrap: str, timeout_s: float, tls: Any = None, sasl: Any = None) -> None:
        """`tls`: a runtime.tls.TlsConfig for an SSL or SASL_SSL listener; `sasl`: the
        runtime.client_config.SaslCredentials to log in with on a SASL_ listener (None: no login)."""
        self._sock = _connect(bootstrap, timeout_s, tls)
        self._correlation = 0
        self._versions = self._negotiate()
        if sasl is not None:
            self._log_in(sasl)

    def _log_in(self, sasl: Any) -> None:
        """KIP-43 SaslHandshake v1, then the mechanism's messages in SaslAuthenticate v1 (KIP-152)."""
        handshake = self._call(SASL_HANDSHAKE, 1, load_request_schema(SASL_HANDSHAKE, 1)(mechanism=sasl.mechanism))
        if handshake.error_code != errors.NONE:
            enabled = ", ".join(handshake.mechanisms)
            raise AclToolError(f"the broker does not enable SASL mechanism {sasl.mechanism} (it enables {enabled})")
        if sasl.mechanism == "PLAIN":
            self._authenticate(f"\x00{sasl.username}\x00{sasl.password}".encode())
            return
        exchange = ScramClientExchange(sasl.mechanism, sasl.username, sasl.password)
        try:
            server_first = self._authenticate(exchange.client_first())
            exchange.verify(self._authenticate(exchange.client_final(server_first)))
        except ScramCredentialError as exc:
            raise AclToolError(str(exc)) from None

    def _authenticate(self, token: bytes) -> bytes:
        answer = self._call(SASL_AUTHENTICATE, 1, load_request_schema(SASL_AUTHENTICATE, 1)(auth_bytes=token))
        if answer.error_code != errors.NONE:
            raise AclToolError(answer.error_message or type(errors.error_for(answer.error_code)).__name__)
        return bytes(answer.auth_bytes)

    def close(self) -> None:
        self._sock.close()

    def _negotiate(self) -> dict[int, int]:
        answer = self._call(API_VERSIONS, 0, load_request_schema(API_VERSIONS, 0)())
        offered = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
        chosen = {}
        for key in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS):
            low, high = offered.get(key, (1, 0))
            common = [v for v in ACL_VERSIONS if low <= v <= high]
            if not common:
                raise AclToolError(
                    f"the broker does not serve the ACL APIs (API key {key}) in a version this tool speaks"
                )
            chosen[key] = max(common)
        return chosen

    def _call(self, api_key: int, version: int, body: Any) -> Any:
        self._correlation += 1
        request_type = load_request_schema(api_key, version)
        header_type = RequestHeaderV2 if request_type.__flexible__ else RequestHeaderV1
        buffer = io.BytesIO()
        entity_writer(header_type)(
            buffer,
            header_type(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=self._correlation,
                client_id=CLIENT_ID,
            ),
        )
        entity_writer(request_type)(buffer, body)
        payload = buffer.getvalue()
        try:
            self._sock.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", _read_exactly(self._sock, 4))
            if not 4 <= size <= FRAME_BYTES_MAX:
                raise AclToolError(f"the broker answered a frame of {size} bytes")
            frame = _read_exactly(self._sock, size)
        except OSError as exc:
            raise AclToolError(f"the broker closed the connection: {exc or type(exc).__name__}") from None
        response_type = load_response_schema(api_key, version)
        offset = 5 if response_type.__flexible__ and api_key != API_VERSIONS else 4
        body, _ = entity_reader(response_type)(frame, offset)
        return body

    def create(self, bindings: list[AclBinding]) -> None:
        version = self._versions[CREATE_ACLS]
        request_type = load_request_schema(CREATE_ACLS, version)
        creation = _nested(request_type, "creations")
        body = request_type(
            creations=tuple(
                creation(
                    resource_type=int(b.pattern.resource_type),
                    resource_name=b.pattern.name,
                    resource_pattern_type=int(b.pattern.pattern_type),
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=int(b.entry.operation),
                    permission_type=int(b.entry.permission_type),
                )
                for b in bindings
            )
        )
        answer = self._call(CREATE_ACLS, version, body)
        for result in answer.results:
            _raise_on_error(int(result.error_code), result.error_message)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        version = self._versions[DESCRIBE_ACLS]
        request_type = load_request_schema(DESCRIBE_ACLS, version)
        body = request_type(
            resource_type_filter=int(acl_filter.resource_type),
            resource_name_filter=acl_filter.name,
            pattern_type_filter=int(acl_filter.pattern_type),
            principal_filter=acl_filter.principal,
            host_filter=acl_filter.host,
            operation=int(acl_filter.operation),
            permission_type=int(acl_filter.permission_type),
        )
        answer = self._call(DESCRIBE_ACLS, version, body)
        _raise_on_error(int(answer.error_code), answer.error_message)
        return [
            AclBinding(
                ResourcePattern(ResourceType.of(r.resource_type), r.resource_name, PatternType.of(r.pattern_type)),
                AccessControlEntry(
                    a.principal, a.host, AclOperation.of(a.operation), AclPermissionType.of(a.permission_type)
                ),
            )
            for r in answer.resources
            for a in r.acls
        ]

    def delete(self, filters: list[AclBindingFilter]) -> None:
        version = self._versions[DELETE_ACLS]
        request_type = load_request_schema(DELETE_ACLS, version)
        item = _nested(request_type, "filters")
        body = request_type(
            filters=tuple(
                item(
                    resource_type_filter=int(f.resource_type),
                    resource_name_filter=f.name,
                    pattern_type_filter=int(f.pattern_type),
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=int(f.operation),
                    permission_type=int(f.permission_type),
                )
                for f in filters
            )
        )
        answer = self._call(DELETE_ACLS, version, body)
        for result in answer.filter_results:
            _raise_on_error(int(result.error_code), result.error_message)


def _nested(request_type: type, field_name: str) -> type:
    """The entity class of a tuple field (`tuple[AclCreation, ...]`): kio's dataclass fields carry real types."""
    return typing.get_args(request_type.__dataclass_fields__[field_name].type)[0]  # type: ignore[attr-defined,no-any-return]


def _raise_on_error(code: int, message: str | None) -> None:
    if code != errors.NONE:
        error = errors.error_for(code)
        raise AclToolError(f"{type(error).__name__}: {message or error}")


def _connect(bootstrap: str, timeout_s: float, tls: Any = None) -> socket.socket:
    problems = []
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise AclToolError(f"bad bootstrap server {address!r}: expected host:port")
        try:
            sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        except OSError as exc:
            problems.append(f"{address}: {exc.strerror or exc}")
            continue
        if tls is None:
            return sock
        try:
            return tls.client_ssl_context().wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            problems.append(f"{address}: TLS handshake failed: {getattr(exc, 'reason', None) or exc}")
    raise AclToolError(f"cannot reach any broker of {bootstrap!r} ({'; '.join(problems) or 'no address'})")


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks += chunk
    return bytes(chunks)


class ZooKeeperAcls:
    """The znodes through the quorum, on an event loop of its own (the tool is synchronous)."""

    def __init__(self, connect: str, timeout_s: float, tls: Any = None) -> None:
        """`tls`: a runtime.tls.TlsConfig for a quorum port that speaks TLS (--zk-tls-config-file), else None."""
        from client.kafka.znodes import secure_default_acls
        from client.zk.aio import AsyncZkClient  # here: `zkraft --help` loads no gRPC
        from runtime.jaas import JaasError, sasl_options_from_env

        # kafka-acls.sh logs in when KAFKA_OPTS names a JAAS file, and creates with Kafka's ACLs then.
        try:
            sasl = sasl_options_from_env("KAFKA_OPTS")
        except JaasError as exc:
            raise AclToolError(f"KAFKA_OPTS: {exc}") from None
        self._loop = asyncio.new_event_loop()
        self._zk = AsyncZkClient(connect, tls=tls, sasl_options=sasl, default_acl=secure_default_acls if sasl else None)
        try:
            self._loop.run_until_complete(self._zk.start(timeout=timeout_s))
        except Exception as exc:
            self._loop.close()
            raise AclToolError(
                f"cannot connect to {connect} within {timeout_s:g}s: {exc or type(exc).__name__}"
            ) from None

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._zk.close())
        finally:
            self._loop.close()

    def _run(self, work: Any) -> Any:
        try:
            return self._loop.run_until_complete(work)
        except (AclStoreError, AclError) as exc:
            raise AclToolError(str(exc)) from None

    def _all(self) -> list[tuple[ResourcePattern, frozenset[AccessControlEntry]]]:
        return list(self._run(load_all_acls(self._zk, _refuse_unreadable)).items())

    def create(self, bindings: list[AclBinding]) -> None:
        for binding in bindings:
            problem = binding_problem(binding)
            if problem is not None:
                raise AclToolError(problem)
        self._run(add_bindings(self._zk, bindings))

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in self._all()
            for entry in sorted(entries)
            if acl_filter.matches(AclBinding(pattern, entry))
        ]

    def delete(self, filters: list[AclBindingFilter]) -> None:
        self._run(remove_bindings(self._zk, self._all(), filters))


def _refuse_unreadable(path: str, error: str) -> None:
    raise AclError(error)


def bindings_by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for pattern, entry in bindings:
        grouped.setdefault(pattern, []).append(entry)
    return grouped
