"""SASL pieces without a network: SCRAM credentials and the server exchange (RFC 7677's worked example and a
real client's messages), PLAIN and its JAAS users, per-listener settings, and the connection state machine.

What a client or an operator sees: the right password logs in, any wrong piece (password, nonce, channel
binding, user) is refused with Kafka's message, a stored credential reads back as Kafka writes it, a bad
setting is refused with one line naming the property.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema

from broker import kafka_api  # noqa: F401  (registers the handlers)
from broker.config import from_properties
from broker.config_describe import BrokerConfigLayers, describe_broker_configs
from broker.kafka_api.entities import build
from broker.kafka_api.registry import KafkaConnectionState
from broker.sasl.authenticator import Admission, SaslAuthenticator, SaslState
from broker.sasl.errors import SaslAuthenticationFailed, SaslCredentialsRejected
from broker.sasl.plain import JaasError, authenticate_plain, parse_jaas_config, plain_users
from broker.sasl.scram import ScramServerExchange, decode_saslname
from broker.sasl.settings import SaslConfigError, is_listener_sasl_property, listener_sasl_settings
from broker.sasl.user_admin import alter_user_scram, describe_user_scram
from client.kafka.scram import (
    ScramCredential,
    ScramCredentialError,
    decode_credential,
    encode_credential,
    make_credential,
)
from client.zk.exceptions import NoNodeError

# RFC 7677 §3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def lookup_for(users: dict[str, ScramCredential]) -> Any:
    async def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return users.get(user)

    return lookup


def rfc_exchange(users: dict[str, ScramCredential] | None = None) -> ScramServerExchange:
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, salt=RFC_SALT)
    return ScramServerExchange(
        "SCRAM-SHA-256", lookup_for(users if users is not None else {"user": credential}), lambda: RFC_SERVER_NONCE
    )


def test_rfc7677_exchange_succeeds_with_its_server_signature() -> None:
    exchange = rfc_exchange()
    assert run(exchange.step(RFC_CLIENT_FIRST)) == RFC_SERVER_FIRST
    assert run(exchange.step(RFC_CLIENT_FINAL)) == RFC_SERVER_FINAL
    assert exchange.complete and exchange.username == "user"


@pytest.mark.parametrize(
    "final",
    [
        RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),  # another proof: a wrong password
        RFC_CLIENT_FINAL.replace(b"hNlF$k0", b"hNlF$k1"),  # another nonce
        RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # another channel binding header
        b"c=biws,r=x",  # no proof
    ],
)
def test_a_wrong_client_final_is_rejected(final: bytes) -> None:
    exchange = rfc_exchange()
    run(exchange.step(RFC_CLIENT_FIRST))
    with pytest.raises(SaslCredentialsRejected):
        run(exchange.step(final))
    assert not exchange.complete


def test_unknown_user_and_bad_first_messages_are_rejected() -> None:
    with pytest.raises(SaslCredentialsRejected, match="Invalid user credentials"):
        run(rfc_exchange({}).step(RFC_CLIENT_FIRST))
    with pytest.raises(SaslCredentialsRejected):
        run(rfc_exchange().step(b"p=tls-unique,,n=user,r=abc"))  # channel binding asked: not offered
    with pytest.raises(SaslCredentialsRejected):
        run(rfc_exchange().step(b"n,,n=user,r=abc,tokenauth=true"))  # a delegation token: none issued
    with pytest.raises(SaslAuthenticationFailed, match="authorization id that is different"):
        run(rfc_exchange().step(b"n,a=admin,n=user,r=abc"))
    with pytest.raises(SaslCredentialsRejected):
        run(rfc_exchange().step(b"\xff\xfe"))


def test_saslname_escapes() -> None:
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(SaslCredentialsRejected):
        decode_saslname("a=b")


def client_proof(mechanism: str, password: str, salt: bytes, iterations: int, auth_message: bytes) -> bytes:
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_credential_made_here_verifies_a_client_that_knows_the_password(mechanism: str) -> None:
    credential = decode_credential(encode_credential(make_credential(mechanism, "alice-secret", 8192)))
    assert credential.iterations == 8192
    exchange = ScramServerExchange(mechanism, lookup_for({"alice": credential}))
    client_first_bare = "n=alice,r=clientnonce"
    server_first = run(exchange.step(f"n,,{client_first_bare}".encode())).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    proof = client_proof(mechanism, "alice-secret", base64.b64decode(fields["s"]), int(fields["i"]), auth_message)
    final = run(exchange.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()))
    assert final.startswith(b"v=") and exchange.complete


def test_credential_text_form_and_limits() -> None:
    text = encode_credential(make_credential("SCRAM-SHA-512", "pw"))
    assert [part.split("=", 1)[0] for part in text.split(",")] == ["salt", "stored_key", "server_key", "iterations"]
    assert text.endswith(",iterations=4096")
    with pytest.raises(ScramCredentialError, match="Iterations 1000 is less than the minimum 4096"):
        make_credential("SCRAM-SHA-512", "pw", 1000)
    with pytest.raises(ScramCredentialError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-MD5", "pw")
    with pytest.raises(ScramCredentialError, match="no server_key"):
        decode_credential("salt=YQ==,stored_key=YQ==,iterations=4096")


JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="al\\"ice";'
)


def test_jaas_users_and_plain() -> None:
    users = plain_users(parse_jaas_config(JAAS))
    assert users == {"admin": "admin-secret", "alice": 'al"ice'}
    assert authenticate_plain(b"\x00admin\x00admin-secret", users) == "admin"
    assert authenticate_plain(b"admin\x00admin\x00admin-secret", users) == "admin"
    for token in (b"\x00admin\x00wrong", b"\x00nobody\x00admin-secret"):
        with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
            authenticate_plain(token, users)
    with pytest.raises(SaslCredentialsRejected, match="expected 3 tokens"):
        authenticate_plain(b"admin", users)
    with pytest.raises(JaasError, match="control flag"):
        parse_jaas_config("PlainLoginModule mandatory user_a=b;")
    with pytest.raises(JaasError, match="ending with ';'"):
        parse_jaas_config("PlainLoginModule required user_a=b")


def test_listener_settings() -> None:
    assert is_listener_sasl_property("listener.name.sasl_plaintext.plain.sasl.jaas.config")
    assert is_listener_sasl_property("listener.name.client.sasl.enabled.mechanisms")
    assert not is_listener_sasl_property("listener.name.client.ssl.keystore.location")
    default = listener_sasl_settings("SASL_PLAINTEXT", {})
    assert default.enabled_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    settings = listener_sasl_settings(
        "CLIENT",
        {
            "listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.client.plain.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": "5000",
            "listener.name.client.plain.connections.max.reauth.ms": "0",
        },
    )
    assert settings.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert settings.reauth_ms_by_mechanism == {"PLAIN": 0, "SCRAM-SHA-512": 5000}
    with pytest.raises(SaslConfigError, match="GSSAPI"):
        listener_sasl_settings("X", {"sasl.enabled.mechanisms": "GSSAPI"})
    with pytest.raises(SaslConfigError, match="enables PLAIN but has no JAAS config"):
        listener_sasl_settings("X", {"sasl.enabled.mechanisms": "PLAIN"})


# ---------------------------------------------------------------- the connection's state machine


class FakeCredentials:
    def __init__(self, users: dict[str, ScramCredential]) -> None:
        self.users = users

    async def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user)


def ctx(api_key: int, version: int) -> Any:
    return SimpleNamespace(api_version=version, response_type=load_response_schema(api_key, version))


def plain_authenticator(clock: list[float]) -> tuple[SaslAuthenticator, KafkaConnectionState]:
    settings = listener_sasl_settings(
        "SASL_PLAINTEXT",
        {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS, "connections.max.reauth.ms": "1000"},
    )
    state = KafkaConnectionState(security_protocol="SASL_PLAINTEXT")
    log = SimpleNamespace(info=lambda *a, **k: None)
    auth = SaslAuthenticator(settings, FakeCredentials({}), state, log, now_s=lambda: clock[0])  # type: ignore[arg-type]
    return auth, state


def handshake(auth: SaslAuthenticator, mechanism: str) -> Any:
    return auth.handshake(build(load_request_schema(17, 1), mechanism=mechanism), ctx(17, 1))


def authenticate(auth: SaslAuthenticator, token: bytes, version: int = 2) -> Any:
    return run(auth.authenticate(build(load_request_schema(36, version), auth_bytes=token), ctx(36, version)))


def test_only_handshake_requests_before_authentication_then_everything_until_expiry() -> None:
    clock = [100.0]
    auth, state = plain_authenticator(clock)
    assert auth.admit(18)[0] is Admission.SERVE  # ApiVersions
    assert auth.admit(3) == (Admission.CLOSE, "Unexpected Kafka request of type 3 during SASL handshake.")
    assert int(handshake(auth, "PLAIN").error_code) == 0
    assert auth.admit(3)[0] is Admission.ILLEGAL_STATE
    response = authenticate(auth, b'\x00alice\x00al"ice')
    assert (int(response.error_code), response.session_lifetime.total_seconds()) == (0, 1.0)
    assert (auth.state, state.principal) == (SaslState.COMPLETE, "User:alice")
    assert auth.admit(3)[0] is Admission.SERVE
    clock[0] += 1.5
    assert auth.admit(3)[0] is Admission.CLOSE  # expired: only a re-authentication is admitted
    assert auth.admit(17)[0] is Admission.SERVE


def test_reauthentication_must_keep_the_user_and_a_wrong_password_fails_with_kafkas_message() -> None:
    clock = [0.0]
    auth, state = plain_authenticator(clock)
    handshake(auth, "PLAIN")
    authenticate(auth, b'\x00alice\x00al"ice')
    assert int(handshake(auth, "PLAIN").error_code) == 0  # KIP-368: a new handshake on the same connection
    assert auth.admit(3)[0] is Admission.SERVE  # the previous session still serves until it expires
    response = authenticate(auth, b"\x00admin\x00admin-secret")
    assert int(response.error_code) == 58
    assert response.error_message == "Cannot change principals during re-authentication from User.alice: User.admin"
    assert auth.failed
    auth, _ = plain_authenticator(clock)
    handshake(auth, "PLAIN")
    response = authenticate(auth, b"\x00alice\x00wrong", version=0)
    assert (int(response.error_code), response.error_message) == (
        58,
        "Authentication failed: Invalid username or password",
    )


def test_unknown_mechanism_is_refused_with_the_enabled_list() -> None:
    auth, _ = plain_authenticator([0.0])
    response = handshake(auth, "SCRAM-SHA-512")
    assert (int(response.error_code), tuple(response.mechanisms)) == (33, ("PLAIN",))
    assert auth.failed


# ---------------------------------------------------------------- KIP-554 on a fake quorum


class FakeZk:
    """The AsyncZkClient calls user_admin makes, on a dict."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.notifications = 0

    async def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], SimpleNamespace(version=0)

    async def get_children(self, path: str) -> list[str]:
        return [p.rsplit("/", 1)[1] for p in self.nodes if p.startswith(path + "/")]

    async def create(self, path: str, value: bytes, makepath: bool = False, sequence: bool = False) -> str:
        if sequence:
            self.notifications += 1
        else:
            self.nodes[path] = value
        return path

    async def set(self, path: str, value: bytes, version: int) -> None:
        self.nodes[path] = value


def upsertion(name: str, mechanism: int, iterations: int = 4096) -> Any:
    return SimpleNamespace(name=name, mechanism=mechanism, iterations=iterations, salt=b"s", salted_password=b"p" * 32)


def test_alter_and_describe_user_scram_credentials_errors() -> None:
    zk = FakeZk()
    results = run(
        alter_user_scram(
            zk,
            [upsertion("a b", 1), upsertion("", 1), upsertion("x", 9), upsertion("y", 2, 100), upsertion("z", 1)],
            [SimpleNamespace(name="z", mechanism=1), SimpleNamespace(name="w", mechanism=2)],
        )
    )
    by_user = {r.user: (r.error_code, r.error_message) for r in results}
    assert by_user == {
        "": (93, "Username must not be empty"),
        "x": (33, "Unknown SCRAM mechanism"),
        "y": (93, "Too few iterations"),
        "z": (92, "A user credential cannot be altered twice in the same request"),
        "a b": (0, None),
        "w": (91, "Attempt to delete a user credential that does not exist"),
    }
    assert "/config/users/a%20b" in zk.nodes and zk.notifications == 1
    [described] = run(describe_user_scram(zk, None))
    assert (described.user, described.credential_infos) == ("a b", ((1, 4096),))
    results = run(describe_user_scram(zk, ["nobody", "a b", "a b"]))
    assert [(r.user, r.error_code) for r in results] == [("nobody", 91), ("a b", 92)]


@settings(max_examples=300, deadline=None)
@given(first=st.binary(max_size=200), final=st.binary(max_size=200))
def test_any_bytes_end_an_exchange_with_a_sasl_failure_never_a_crash(first: bytes, final: bytes) -> None:
    exchange = rfc_exchange()
    for token in (first, final):
        try:
            run(exchange.step(token))
        except (SaslCredentialsRejected, SaslAuthenticationFailed):
            return
    assert exchange.complete is False or exchange.username == "user"
    with contextlib.suppress(SaslCredentialsRejected, SaslAuthenticationFailed):
        authenticate_plain(first, {"user": "pencil"})


def test_describe_configs_shows_the_jaas_config_as_sensitive_without_its_value() -> None:
    """Kafka's sasl.jaas.config is a PASSWORD config: DescribeConfigs names it, never its passwords."""
    properties = {"sasl.jaas.config": JAAS, "sasl.enabled.mechanisms": "PLAIN"}
    config = from_properties(properties)
    layers = BrokerConfigLayers(dynamic_broker={}, dynamic_default={}, static=properties)
    entries = describe_broker_configs(config, layers, None, per_broker=True, synonyms=True)
    [jaas] = [e for e in entries if e.name == "sasl.jaas.config"]
    assert (jaas.value, jaas.is_sensitive) == (None, True)
    assert all(s.value is None for s in jaas.synonyms)
    assert "admin-secret" not in repr(entries)
