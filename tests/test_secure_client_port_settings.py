"""secureClientPort, secureClientPortAddress and ZooKeeper's server `ssl.*` properties in a node's settings:
what is read, the defaults ZooKeeper has, and one-line errors for what cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

from quorum.settings import SettingsError, load_node_settings

PEERS = "1=127.0.0.1:7001"


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    config = tmp_path / "node.properties"
    config.write_text(text, encoding="utf-8")
    return load_node_settings({"id": 1, "data_dir": str(tmp_path / "data"), "peers": PEERS}, config)


def test_no_secure_client_port_unless_one_is_given(tmp_path: Path) -> None:
    settings = load(tmp_path, "")
    assert (settings.secure_client_port, settings.client_ssl) == (0, {})


def test_the_secure_client_port_reads_zookeepers_names_in_both_spellings(tmp_path: Path) -> None:
    text = (
        "secureClientPort=12281\n"
        "secureClientPortAddress=127.0.0.1\n"
        "ssl.keyStore.location=/etc/zk/node.pem\n"
        "ssl.keyStore.type=PEM\n"
        "zookeeper.ssl.trustStore.location=/etc/zk/ca.pem\n"  # the Java system property's spelling
        "ssl.clientAuth=want\n"
    )
    settings = load(tmp_path, text)
    assert (settings.secure_client_port, settings.secure_client_port_address) == (12281, "127.0.0.1")
    assert settings.client_ssl == {
        "ssl.keyStore.location": "/etc/zk/node.pem",
        "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": "/etc/zk/ca.pem",
        "ssl.clientAuth": "want",
    }
    assert settings.secure_client_port_address == "127.0.0.1"
    assert settings.client_port == 2181  # the plaintext port stays, unless clientPort=0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("secureClientPort=2281\n", "secureClientPort: ssl.trustStore.location is not set"),
        (
            "secureClientPort=2281\nssl.trustStore.location=/ca.pem\n",
            "secureClientPort: ssl.keyStore.location is not set",
        ),
        (
            "secureClientPort=2281\nssl.trustStore.location=/ca.pem\nssl.keyStore.location=/k.jks\n"
            "ssl.keyStore.type=JKS\n",
            "ssl.keyStore.type: JKS stores are not read; give PEM files",
        ),
        (
            "secureClientPort=2281\nssl.trustStore.location=/ca.pem\nssl.keyStore.location=/k.pem\n"
            "ssl.clientAuth=always\n",
            "ssl.clientAuth: 'always' is not one of none, want, need",
        ),
        ("secureClientPort=70000\n", "secureClientPort: must be <= 65535"),
        ("secureClientPort=2181\n", "secureClientPort: 2181 is also the clientPort"),
        ("secureClientPortAddress=127.0.0.1:2281\n", "secureClientPortAddress: '127.0.0.1:2281' is not a host"),
        ("ssl.keyStore.location=/a\nzookeeper.ssl.keyStore.location=/b\n", "given twice"),
        ("ssl.keyStore.password=secret\n", "unknown property 'ssl.keyStore.password'"),
    ],
)
def test_a_bad_secure_client_port_setting_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load(tmp_path, text)
    assert expected in str(raised.value)
    assert "\n" not in str(raised.value)
