"""The `ssl.*` settings of the broker's TLS listeners as Kafka's KafkaConfig reads them: PEM files, the
`listener.name.<name>.ssl.*` per-listener overrides, and one-line errors for what cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfigError, from_properties
from broker.listener_tls import listener_tls_config, server_context
from runtime.tls import TlsConfigError
from tests.tls_material import make_tls_material

SSL_LISTENER = {"listeners": "SSL://127.0.0.1:0"}


def test_an_ssl_listener_reads_kafkas_pem_keystore_and_truststore(tmp_path: Path) -> None:
    material = make_tls_material(tmp_path)
    properties = {
        **SSL_LISTENER,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.server_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(material.ca_file),
    }
    config = from_properties(properties)
    [listener] = config.kafka_listeners
    assert listener.advertised.security_protocol == "SSL"
    tls = listener_tls_config(config.given, listener.name, "SSL")
    assert tls is not None
    assert (tls.keystore_file, tls.truststore_file, tls.client_auth) == (
        material.server_keystore,
        material.ca_file,
        "none",  # Kafka's default ssl.client.auth
    )
    server_context(tls, listener.name)  # the files load


def test_listener_prefixed_properties_override_one_listener_one_property_at_a_time(tmp_path: Path) -> None:
    material = make_tls_material(tmp_path)
    properties = {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,PLAIN://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SSL,PLAIN:PLAINTEXT",
        "ssl.keystore.location": str(material.server_keystore),
        "ssl.truststore.location": str(material.ca_file),
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.internal.ssl.truststore.location": str(material.other_ca_file),
    }
    config = from_properties(properties)
    by_name = {
        listener.name: listener_tls_config(config.given, listener.name, listener.advertised.security_protocol)
        for listener in config.kafka_listeners
    }
    assert by_name["PLAIN"] is None  # a PLAINTEXT listener has no TLS, whatever ssl.* says
    client, internal = by_name["CLIENT"], by_name["INTERNAL"]
    assert client is not None and internal is not None
    assert (client.client_auth, client.truststore_file) == ("none", material.ca_file)
    assert (internal.client_auth, internal.truststore_file) == ("required", material.other_ca_file)
    assert internal.keystore_file == material.server_keystore  # not overridden: the broker-wide one


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "listener SSL (SSL): ssl.truststore.location is not set"),
        ({"ssl.truststore.location": "ca.pem"}, "listener SSL (SSL): ssl.keystore.location is not set"),
        (
            {"ssl.truststore.location": "ca.pem", "ssl.keystore.location": "k.jks", "ssl.keystore.type": "JKS"},
            "ssl.keystore.type: JKS stores are not read; give PEM files",
        ),
        (
            {"ssl.truststore.location": "ca.pem", "ssl.keystore.location": "k.pem", "ssl.client.auth": "maybe"},
            "ssl.client.auth: 'maybe' is not one of none, requested, required",
        ),
        ({"ssl.keystore.password": "secret"}, "unknown broker property 'ssl.keystore.password'"),
        ({"listener.name.SSL.ssl.client.auth": "required"}, "unknown broker property 'listener.name.SSL.ssl"),
    ],
)
def test_a_bad_tls_setting_is_one_line_naming_it(properties: dict[str, str], message: str) -> None:
    with pytest.raises(BrokerConfigError) as raised:
        from_properties({**SSL_LISTENER, **properties})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_unreadable_or_unusable_file_is_named_when_the_listener_starts(tmp_path: Path) -> None:
    material = make_tls_material(tmp_path)
    missing = tmp_path / "missing.pem"
    tls = listener_tls_config(
        {"ssl.keystore.location": str(missing), "ssl.truststore.location": str(material.ca_file)}, "SSL", "SSL"
    )
    assert tls is not None
    with pytest.raises(TlsConfigError, match=f"listener SSL: {missing}: cannot be read"):
        server_context(tls, "SSL")
    not_pem = tmp_path / "keystore.jks"
    not_pem.write_bytes(b"\xfe\xed\xfe\xed binary")
    tls = listener_tls_config(
        {"ssl.keystore.location": str(not_pem), "ssl.truststore.location": str(material.ca_file)}, "SSL", "SSL"
    )
    assert tls is not None
    with pytest.raises(TlsConfigError, match="not a PEM file"):
        server_context(tls, "SSL")
