"""The gRPC port's login, piece by piece: the SDK's SCRAM exchange against the broker's, the broker's sessions and
their lifetime, certificate principals in Kafka's RFC 2253 form, the client's SASL properties and the broker's
settings that turn SASL on, each refused in one line when wrong. The cluster half is in tests/test_tls_grpc.py."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from broker.config import BrokerConfigError, from_properties
from broker.sasl.grpc_login import EXCHANGE_TIMEOUT_S, GrpcSaslLogin, Unauthenticated
from broker.sasl.scram import ScramServerExchange
from broker.sasl.settings import listener_sasl_settings
from broker.ssl_principal import certificate_principal, rfc2253_name
from client.kafka import errors
from client.kafka.sasl_session import GrpcSaslSession, SessionInterceptor
from client.kafka.scram import ScramClientExchange, ScramCredentialError, make_credential
from runtime import certificates
from runtime.client_config import SaslCredentials, kafka_client_sasl
from runtime.tls import TlsConfigError
from zkraft_proto import broker_pb2 as pb

MECHANISM = "SCRAM-SHA-512"
CREDENTIAL = make_credential(MECHANISM, "alice-secret")
INVALID = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {MECHANISM}"


class Credentials:
    """The ScramCredentialCache's lookup, over one user."""

    def __init__(self) -> None:
        self.users = {"alice": CREDENTIAL}
        self.on_user_deleted: list = []

    async def credential(self, user: str, mechanism: str):  # type: ignore[no-untyped-def]
        return self.users.get(user) if mechanism == MECHANISM else None


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def _login(reauth_ms: int = 0) -> tuple[GrpcSaslLogin, Credentials, Clock]:
    properties = {"sasl.enabled.mechanisms": MECHANISM, "connections.max.reauth.ms": str(reauth_ms)}
    credentials, clock = Credentials(), Clock()
    log = SimpleNamespace(info=lambda *a, **k: None)
    login = GrpcSaslLogin(listener_sasl_settings("GRPC", properties), credentials, log, clock)  # type: ignore[arg-type]
    return login, credentials, clock


def _log_in(login: GrpcSaslLogin, user: str, password: str) -> pb.SaslAuthenticateResponse:
    """The SDK's two steps (client/kafka/sasl_session.py) against the broker's handler."""
    client = ScramClientExchange(MECHANISM, user, password)
    first = asyncio.run(login.authenticate(pb.SaslAuthenticateRequest(mechanism=MECHANISM,
                                                                      auth_bytes=client.client_first())))  # fmt: skip
    if first.error_code:
        return first
    final = pb.SaslAuthenticateRequest(
        mechanism=MECHANISM, auth_bytes=client.client_final(first.auth_bytes), exchange_id=first.exchange_id
    )
    answer = asyncio.run(login.authenticate(final))
    if answer.error_code == 0:
        client.verify(answer.auth_bytes)  # the broker proved it holds alice's credential
    return answer


def test_a_login_opens_a_session_whose_token_names_the_user() -> None:
    login, _, _ = _login()
    answer = _log_in(login, "alice", "alice-secret")
    assert answer.error_code == 0 and answer.session_lifetime_ms == 0 and len(answer.session_token) >= 40
    assert login.principal(f"Bearer {answer.session_token}") == "User:alice"
    assert _log_in(login, "alice", "alice-secret").session_token != answer.session_token  # a fresh token each time


def test_a_wrong_password_and_an_unknown_user_get_kafkas_one_line() -> None:
    login, _, _ = _login()
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        answer = _log_in(login, user, password)
        assert (answer.error_code, answer.error_message) == (errors.SaslAuthenticationFailedError.code, INVALID)
        assert not answer.session_token


def test_the_client_refuses_a_server_that_does_not_hold_the_credential() -> None:
    """RFC 5802 §3: ServerSignature proves the server knows the credential; a replayed or forged one is refused."""
    impostor = ScramServerExchange(MECHANISM, Credentials().credential)
    client = ScramClientExchange(MECHANISM, "alice", "alice-secret")
    first = asyncio.run(impostor.step(client.client_first()))
    asyncio.run(impostor.step(client.client_final(first)))
    with pytest.raises(ScramCredentialError, match="Invalid server signature"):
        client.verify(b"v=" + b"QUFBQQ==")
    with pytest.raises(ScramCredentialError, match="does not extend ours"):
        ScramClientExchange(MECHANISM, "alice", "x").client_final(b"r=other,s=c2FsdA==,i=4096")
    with pytest.raises(ScramCredentialError, match="more than the maximum"):  # no unbounded PBKDF2 for a server
        client = ScramClientExchange(MECHANISM, "alice", "x", nonce="n")
        client.client_final(b"r=nX,s=c2FsdA==,i=100000000")


def test_sessions_end_after_connections_max_reauth_ms_and_unknown_tokens_are_refused() -> None:
    login, credentials, clock = _login(reauth_ms=60_000)
    answer = _log_in(login, "alice", "alice-secret")
    assert answer.session_lifetime_ms == 60_000
    clock.now_s += 59
    assert login.principal(f"Bearer {answer.session_token}") == "User:alice"
    clock.now_s += 2
    with pytest.raises(Unauthenticated, match=r"^the SASL session expired \(connections.max.reauth.ms\)"):
        login.principal(f"Bearer {answer.session_token}")
    live = _log_in(login, "alice", "alice-secret").session_token
    del credentials.users["alice"]  # KIP-368: a deleted user is refused at its next login
    assert _log_in(login, "alice", "alice-secret").error_message == INVALID
    assert login.principal(f"Bearer {live}") == "User:alice"
    for deleted in credentials.on_user_deleted:  # the /config/changes notification reaches the cache
        deleted("alice")
    with pytest.raises(Unauthenticated, match="not known to this broker"):  # and her sessions end with it
        login.principal(f"Bearer {live}")
    with pytest.raises(Unauthenticated, match="not known to this broker"):
        login.principal("Bearer made-up")
    with pytest.raises(Unauthenticated, match="is not 'Bearer <session token>'"):
        login.principal("Basic YWxpY2U=")


def test_a_half_done_exchange_expires_and_another_mechanism_is_refused() -> None:
    login, _, clock = _login()
    client = ScramClientExchange(MECHANISM, "alice", "alice-secret")
    first = asyncio.run(login.authenticate(pb.SaslAuthenticateRequest(mechanism=MECHANISM,
                                                                      auth_bytes=client.client_first())))  # fmt: skip
    clock.now_s += EXCHANGE_TIMEOUT_S + 1
    late = pb.SaslAuthenticateRequest(
        mechanism=MECHANISM, auth_bytes=client.client_final(first.auth_bytes), exchange_id=first.exchange_id
    )
    answer = asyncio.run(login.authenticate(late))
    assert answer.error_code == errors.IllegalSaslStateError.code and "start the login again" in answer.error_message
    plain = asyncio.run(login.authenticate(pb.SaslAuthenticateRequest(mechanism="PLAIN", auth_bytes=b"\0a\0b")))
    assert plain.error_code == errors.UnsupportedSaslMechanismError.code
    assert plain.error_message.startswith("Unsupported SASL mechanism PLAIN; this broker enables SCRAM-SHA-512")


def _certificate(*attributes: x509.NameAttribute) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(list(attributes))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(Encoding.PEM)


def test_certificate_principals_are_kafkas_rfc2253_subject(tmp_path: Path) -> None:
    """DefaultKafkaPrincipalBuilder: User: + X500Principal.getName(), RDNs last to first, RFC 2253 escapes, an
    attribute without a keyword as its OID and BER value in hex."""
    pem = _certificate(
        x509.NameAttribute(NameOID.COUNTRY_NAME, "GB"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Kafka"),
        x509.NameAttribute(NameOID.COMMON_NAME, "broker-1"),
    )
    assert certificate_principal(pem) == "User:CN=broker-1,OU=Kafka,O=Acme\\, Inc,C=GB"
    email = x509.Name(
        [x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"), x509.NameAttribute(NameOID.COMMON_NAME, "x")]
    )
    assert rfc2253_name(email) == "CN=x,1.2.840.113549.1.9.1=#1605614062" + b".c".hex()
    authority = certificates.create_authority("test CA")
    keystore = certificates.issue_keystore(authority, tmp_path / "b.pem", "broker-2", ["127.0.0.1"])
    assert certificate_principal(keystore.read_bytes()) == "User:CN=broker-2"  # what zkraft up --secure issues


def test_client_sasl_properties_use_kafkas_and_librdkafkas_names() -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p w";'
    sasl = {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM}
    assert kafka_client_sasl({**sasl, "sasl.jaas.config": jaas}) == SaslCredentials(MECHANISM, "alice", "p w")
    assert kafka_client_sasl({**sasl, "sasl.username": "bob", "sasl.password": "x"}) == SaslCredentials(
        MECHANISM, "bob", "x"
    )
    assert kafka_client_sasl({"security.protocol": "SSL", "sasl.username": "bob"}) is None
    with pytest.raises(TlsConfigError, match=r"^sasl.mechanism: GSSAPI is not served; give one of SCRAM-SHA-512"):
        kafka_client_sasl({"security.protocol": "SASL_SSL", "sasl.username": "a", "sasl.password": "b"})
    with pytest.raises(TlsConfigError, match=r"^security.protocol=SASL_SSL needs a user: sasl.jaas.config with"):
        kafka_client_sasl(sasl)
    with pytest.raises(TlsConfigError, match=r"^sasl.jaas.config: invalid control flag 'mandatory'"):
        kafka_client_sasl({**sasl, "sasl.jaas.config": "ScramLoginModule mandatory username=a;"})


def test_a_sasl_grpc_port_needs_mutual_tls_so_that_brokers_reach_each_other(tmp_path: Path) -> None:
    authority = certificates.create_authority("test CA")
    certificates.write_authority(tmp_path, authority)
    keystore = certificates.issue_keystore(authority, tmp_path / "b.pem", "broker-1", ["127.0.0.1"])
    tls = {"ssl.keystore.location": str(keystore), "ssl.truststore.location": str(tmp_path / "ca.pem")}
    grpc_sasl = {**tls, "security.inter.broker.protocol": "SSL", "listener.security.protocol.map": "GRPC:SASL_SSL"}
    with pytest.raises(BrokerConfigError, match=r"^ssl.client.auth=none: the gRPC port's protocol is SASL_SSL"):
        from_properties(grpc_sasl)
    from_properties({**grpc_sasl, "listener.name.grpc.ssl.client.auth": "required"})
    with pytest.raises(BrokerConfigError, match=r"GRPC:SASL_PLAINTEXT is not served: brokers call each other"):
        from_properties({"listener.security.protocol.map": "GRPC:SASL_PLAINTEXT"})
    with pytest.raises(BrokerConfigError, match=r"listener GRPC enables GSSAPI"):
        from_properties({**grpc_sasl, "ssl.client.auth": "required", "sasl.enabled.mechanisms": "GSSAPI"})


class _Channel:
    """A channel whose SaslAuthenticate runs the broker's login in-process (no network): what the SDK's session
    sends and reads is the real thing, the transport is not."""

    def __init__(self, login: GrpcSaslLogin) -> None:
        self.login = login
        self.calls = 0

    def unary_unary(self, method: str, request_serializer=None, response_deserializer=None, **_: object):  # type: ignore[no-untyped-def]
        def call(request: pb.SaslAuthenticateRequest, timeout: float | None = None) -> pb.SaslAuthenticateResponse:
            assert method.endswith("/SaslAuthenticate"), method
            self.calls += 1
            return asyncio.run(self.login.authenticate(request))

        return call


class _Outcome:
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


def test_the_sdk_logs_in_again_when_its_session_nears_its_end_or_the_broker_forgets_it() -> None:
    """KIP-368's client side: a new login past 85% of the session's lifetime, before the broker would refuse it; and
    a token the broker answers UNAUTHENTICATED (it restarted) is dropped, so the next call logs in again."""
    login, _, clock = _login(reauth_ms=100_000)
    channel = _Channel(login)
    session = GrpcSaslSession("b:1", channel, SaslCredentials(MECHANISM, "alice", "alice-secret"), 5.0, clock)  # type: ignore[arg-type]
    session.ensure()
    first = session.token
    assert first is not None and login.principal(f"Bearer {first}") == "User:alice" and session.logins == 1
    clock.now_s += 80
    session.ensure()  # 80% of the lifetime: the session serves on
    assert (session.token, session.logins) == (first, 1)
    clock.now_s += 6
    session.ensure()  # past 85%: a new login, while the old session still holds
    second = session.token
    assert second not in (None, first) and session.logins == 2
    interceptor = SessionInterceptor(session)
    interceptor._on_done(first, _Outcome(grpc.StatusCode.UNAUTHENTICATED))  # a stale token's answer: ignored
    assert session.token == second
    interceptor._on_done(second, _Outcome(grpc.StatusCode.OK))
    assert session.token == second
    interceptor._on_done(second, _Outcome(grpc.StatusCode.UNAUTHENTICATED))
    assert session.token is None
    session.ensure()
    assert session.token not in (None, second) and session.logins == 3 and channel.calls == 6  # two steps each


def test_a_refused_sdk_login_raises_kafkas_error_with_the_brokers_line() -> None:
    login, _, clock = _login()
    session = GrpcSaslSession("b:1", _Channel(login), SaslCredentials(MECHANISM, "alice", "nope"), 5.0, clock)  # type: ignore[arg-type]
    with pytest.raises(errors.SaslAuthenticationFailedError, match=f"^{INVALID}$"):
        session.ensure()
    assert session.token is None


def test_any_bytes_a_client_sends_get_an_answer_and_open_no_session() -> None:
    login, _, _ = _login()
    for auth_bytes, exchange_id in ((b"\xff\xfe", ""), (b"n,,n=alice", ""), (b"", ""), (b"c=biws,r=x,p=AAAA", "nope")):
        request = pb.SaslAuthenticateRequest(mechanism=MECHANISM, auth_bytes=auth_bytes, exchange_id=exchange_id)
        answer = asyncio.run(login.authenticate(request))
        assert answer.error_code in (errors.SaslAuthenticationFailedError.code, errors.IllegalSaslStateError.code)
        assert answer.error_message and not answer.session_token
