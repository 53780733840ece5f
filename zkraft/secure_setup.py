"""`zkraft up --secure`: the cluster's CA and certificates, each process's TLS properties, the client files.

Everything lives under DIR/security (mode 0700): the CA (`ca.pem`, the truststore every process and
client gets; `ca-key.pem`, kept to issue more certificates), a PEM keystore per quorum node and broker
(`quorum-N.pem`, `broker-N.pem`: key, certificate with 127.0.0.1 and localhost as subjectAltNames, CA)
and one for the admin client (`admin.pem`). A second `zkraft up --secure` on the same directory keeps
the CA, the keystores and the admin password, so that clients' files stay valid.

Properties are written as Kafka and ZooKeeper spell them:
* quorum nodes: `sslQuorum=true` + `ssl.quorum.*` (mutual TLS on the gRPC port: peers and ZooKeeper
  gRPC clients); ZooKeeper's `secureClientPort` + `ssl.*` for the wire port when this build's nodes
  know `secureClientPort` (its TLS is served by the socket front end).
* brokers: `security.inter.broker.protocol=SSL` + `ssl.*` (the gRPC port, replica fetches, controller
  requests), `zookeeper.ssl.client.enable=true` + `zookeeper.ssl.*` (the session to the quorum, with
  the broker's certificate), and `SASL_SSL://` Kafka listeners (TLS, then a SCRAM login:
  `sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256`). The gRPC port is SASL_SSL too
  (`listener.security.protocol.map=...,GRPC:SASL_SSL`) with mutual TLS
  (`listener.name.grpc.ssl.client.auth=required`): clients log in with SCRAM, brokers call each other by
  certificate. Kafka's AclAuthorizer is on (`authorizer.class.name`, `allow.everyone.if.no.acl.found=false`)
  with `super.users` the admin and every broker's certificate principal (`User:CN=broker-N`).
* clients: DIR/client.properties in Kafka's client format (`security.protocol=SASL_SSL`,
  `sasl.mechanism=SCRAM-SHA-512`, `sasl.jaas.config` with the admin user, `ssl.truststore.*`, and the admin's
  certificate as `ssl.keystore.*`, which the gRPC ports ask for) for `--command-config`, the SDK and any Kafka
  client, and DIR/zookeeper-client.properties in ZooKeeper's
  (`zookeeper.client.secure=true`, `zookeeper.ssl.*` with the admin keystore) for
  `zkraft zk -client-configuration`.

The admin user ("admin", a random password) is recorded in cluster.json; `store_admin_credential` stores
its SCRAM credentials in /config/users/admin once the quorum has a leader, before the brokers start.

ZooKeeper SASL (DIGEST-MD5): DIR/security/zookeeper-jaas.conf holds the quorum's `Server` section (the users
`broker`, with a random password kept in the file, and `admin`, the ZooKeeper super user through
`zookeeper.superUser`) and the brokers' `Client` section; brokers run with `zookeeper.set.acl=true`, so
Kafka's znodes get Kafka's ACLs. DIR/zookeeper-client-jaas.conf, beside zookeeper-client.properties, is the
admin's `Client` section for zkCli (`-Djava.security.auth.login.config` in CLIENT_JVMFLAGS) and Kafka's tools.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from broker.authorizer import ACL_AUTHORIZER_CLASS
from client import ZkClient
from client.kafka.scram import store_scram_credential
from client.kafka.znodes import PERSISTENT_PATHS, secure_default_acls
from runtime import certificates
from runtime.jaas import JaasError, digest_client_login, digest_server_users
from runtime.tls import TlsConfig

SECURITY_DIR = "security"
CLIENT_PROPERTIES = "client.properties"
ZOOKEEPER_CLIENT_PROPERTIES = "zookeeper-client.properties"
ADMIN_USER = "admin"
CA_COMMON_NAME = "zkraft local CA"
# Every address `zkraft up` binds is a loopback one (127.0.0.1); localhost too, for clients that dial it so.
LOCAL_NAMES = ("127.0.0.1", "localhost")
PASSWORD_BYTES = 18  # 24 URL-safe characters
# The Kafka listeners' SASL mechanisms, and the one client.properties logs in with (Kafka's strongest served).
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
CLIENT_MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# ZooKeeper's SASL users: the brokers' login to the quorum (zookeeper.set.acl) and the JAAS files' names.
BROKER_ZK_USER = "broker"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
ZOOKEEPER_JAAS = "zookeeper-jaas.conf"
ZOOKEEPER_CLIENT_JAAS = "zookeeper-client-jaas.conf"
DIRECTORY_MODE = 0o700
# Kafka's default listener.security.protocol.map, and the brokers' gRPC port (the listener GRPC) as SASL_SSL.
BROKER_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,GRPC:SASL_SSL"


class Child(Protocol):
    """What this module needs of a zkraft up child (zkraft.up.ChildSpec)."""

    role: str
    child_id: int
    address: str


@dataclass(frozen=True, slots=True)
class SecurityFiles:
    """The files of one secure local cluster and the admin user."""

    directory: Path
    ca_file: Path
    admin_keystore: Path
    client_properties: Path
    zookeeper_client_properties: Path
    username: str
    password: str
    zookeeper_jaas: Path | None = None  # the quorum's Server and the brokers' Client sections (0600)
    zookeeper_client_jaas: Path | None = None  # the admin's Client section, for zkCli and Kafka's tools

    def keystore(self, child: Child) -> Path:
        return self.directory / f"{common_name(child)}.pem"

    @property
    def admin_tls(self) -> TlsConfig:
        """What `zkraft up` itself connects with (a ZooKeeper client of the quorum port needs a certificate)."""
        return TlsConfig(self.admin_keystore, self.ca_file)

    def cluster_record(self) -> dict[str, str]:
        """cluster.json's "security" object (issue 30's names)."""
        return {
            "ca_file": str(self.ca_file),
            "client_properties": str(self.client_properties),
            "zookeeper_client_properties": str(self.zookeeper_client_properties),
            "username": self.username,
            "password": self.password,
            **({"zookeeper_jaas_config": str(self.zookeeper_client_jaas)} if self.zookeeper_client_jaas else {}),
            # Kafka's tools that write Kafka's znodes with --zookeeper log in as the brokers do (KAFKA_OPTS), as
            # Kafka's docs ask: with zookeeper.set.acl a znode is its creator's, and the brokers must read it.
            **({"broker_jaas_config": str(self.zookeeper_jaas)} if self.zookeeper_jaas else {}),
        }


def common_name(child: Child) -> str:
    """`quorum-N` or `broker-N`: the certificate's subject, and its keystore's file name."""
    kind = "quorum" if child.role.startswith("quorum") else "broker"
    return f"{kind}-{child.child_id}"


def prepare(root: Path, children: list[Child], cluster_file: Path) -> SecurityFiles:
    """The CA (made once), a keystore per child and for the admin, and the two client files."""
    directory = root / SECURITY_DIR
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, DIRECTORY_MODE)
    if (directory / "ca.pem").is_file() and (directory / "ca-key.pem").is_file():
        authority = certificates.load_authority(directory)
    else:
        authority = certificates.create_authority(CA_COMMON_NAME)
        certificates.write_authority(directory, authority)
    files = SecurityFiles(
        directory=directory,
        ca_file=directory / "ca.pem",
        admin_keystore=directory / f"{ADMIN_USER}.pem",
        client_properties=root / CLIENT_PROPERTIES,
        zookeeper_client_properties=root / ZOOKEEPER_CLIENT_PROPERTIES,
        username=ADMIN_USER,
        password=_recorded_password(cluster_file) or secrets.token_urlsafe(PASSWORD_BYTES),
        zookeeper_jaas=directory / ZOOKEEPER_JAAS,
        zookeeper_client_jaas=root / ZOOKEEPER_CLIENT_JAAS,
    )
    for child in children:
        if not files.keystore(child).is_file():
            host = child.address.rpartition(":")[0].strip("[]")
            names = dict.fromkeys([*LOCAL_NAMES, host])
            certificates.issue_keystore(authority, files.keystore(child), common_name(child), names)
    if not files.admin_keystore.is_file():
        certificates.issue_keystore(authority, files.admin_keystore, ADMIN_USER, ())
    certificates.write_secret(files.client_properties, _text(client_properties(files)).encode())
    certificates.write_secret(files.zookeeper_client_properties, _text(zookeeper_client_properties(files)).encode())
    _write_zookeeper_jaas(files)
    return files


def _digest_module(options: dict[str, str]) -> str:
    lines = "".join(f'\n    {key}="{value}"' for key, value in options.items())
    return f"    {DIGEST_LOGIN_MODULE} required{lines};\n"


def _write_zookeeper_jaas(files: SecurityFiles) -> None:
    """The quorum's and brokers' JAAS file (a broker password made once and kept in it), and the admin's."""
    assert files.zookeeper_jaas is not None and files.zookeeper_client_jaas is not None
    broker_password = _kept_broker_password(files.zookeeper_jaas) or secrets.token_urlsafe(PASSWORD_BYTES)
    users = {f"user_{ADMIN_USER}": files.password, f"user_{BROKER_ZK_USER}": broker_password}
    server = "Server {\n" + _digest_module(users) + "};\n"
    broker = "Client {\n" + _digest_module({"username": BROKER_ZK_USER, "password": broker_password}) + "};\n"
    admin = "Client {\n" + _digest_module({"username": files.username, "password": files.password}) + "};\n"
    certificates.write_secret(files.zookeeper_jaas, (server + broker).encode())
    certificates.write_secret(files.zookeeper_client_jaas, admin.encode())


def _kept_broker_password(path: Path) -> str | None:
    try:
        return digest_server_users(path).get(BROKER_ZK_USER)
    except JaasError:
        return None


def broker_zookeeper_login(files: SecurityFiles) -> dict[str, str]:
    """The brokers' SASL login to the quorum as the SDK's (and kazoo's) sasl_options."""
    assert files.zookeeper_jaas is not None
    username, password = digest_client_login(files.zookeeper_jaas)
    return {"mechanism": "DIGEST-MD5", "username": username, "password": password}


def _recorded_password(cluster_file: Path) -> str | None:
    try:
        document: Any = json.loads(cluster_file.read_text(encoding="utf-8"))
        password = document["security"]["password"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return password if isinstance(password, str) and password else None


def _text(properties: dict[str, str]) -> str:
    header = "# Written by `zkraft up --secure`.\n"
    return header + "".join(f"{key}={value}\n" for key, value in properties.items())


def client_properties(files: SecurityFiles) -> dict[str, str]:
    """Kafka's client properties (CommonClientConfigs, SslConfigs, SaslConfigs): TLS with the cluster's CA and
    the admin's SCRAM login (zkraft's gRPC clients take the TLS half)."""
    jaas = f'{SCRAM_LOGIN_MODULE} required username="{files.username}" password="{files.password}";'
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": CLIENT_MECHANISM,
        "sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_file),
        "ssl.endpoint.identification.algorithm": "https",
        # The brokers' gRPC ports require a client certificate (mutual TLS); Kafka listeners do not ask for one.
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.admin_keystore),
    }


def zookeeper_client_properties(files: SecurityFiles) -> dict[str, str]:
    """ZooKeeper's client properties (ZKClientConfig): TLS with the admin's certificate (the port needs one)."""
    return {
        "zookeeper.client.secure": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keyStore.location": str(files.admin_keystore),
        "zookeeper.ssl.keyStore.type": "PEM",
        "zookeeper.ssl.trustStore.location": str(files.ca_file),
        "zookeeper.ssl.trustStore.type": "PEM",
    }


def quorum_properties(files: SecurityFiles, node: Child, zk_port: int, secure_client_port: bool) -> dict[str, str]:
    """A quorum node's TLS properties, ZooKeeper's names. `secure_client_port`: whether this build's nodes serve
    ZooKeeper's secureClientPort (the wire port's TLS); without it the wire port stays as it was."""
    keystore = str(files.keystore(node))
    properties = {
        "sslQuorum": "true",
        "ssl.quorum.keyStore.location": keystore,
        "ssl.quorum.keyStore.type": "PEM",
        "ssl.quorum.trustStore.location": str(files.ca_file),
        "ssl.quorum.trustStore.type": "PEM",
    }
    if secure_client_port:
        properties |= {
            "secureClientPort": str(zk_port),
            "ssl.keyStore.location": keystore,
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(files.ca_file),
            "ssl.trustStore.type": "PEM",
        }
    if files.zookeeper_jaas is not None:
        properties |= {"java.security.auth.login.config": str(files.zookeeper_jaas), "zookeeper.superUser": ADMIN_USER}
    return properties


def super_users(files: SecurityFiles, brokers: Sequence[Child]) -> str:
    """Kafka's `super.users`: the admin (its SCRAM login) and each broker by its certificate's subject."""
    return ";".join([f"User:{files.username}", *(f"User:CN={common_name(b)}" for b in brokers)])


def broker_properties(files: SecurityFiles, broker: Child, brokers: Sequence[Child]) -> dict[str, str]:
    """A broker's security properties, Kafka's names: TLS and SASL on the gRPC port and the Kafka listener, the
    inter-broker channels, its quorum session, and the authorizer. `brokers`: every broker of the cluster."""
    keystore = str(files.keystore(broker))
    return {
        "security.inter.broker.protocol": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_file),
        "ssl.client.auth": "none",
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.keystore.location": keystore,
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(files.ca_file),
        "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        "listener.security.protocol.map": BROKER_PROTOCOL_MAP,
        "listener.name.grpc.ssl.client.auth": "required",
        "authorizer.class.name": ACL_AUTHORIZER_CLASS,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": super_users(files, brokers),
        # Kafka's znodes get Kafka's ACLs; the broker logs in with the JAAS file's Client section (--jaas-config).
        **({"zookeeper.set.acl": "true"} if files.zookeeper_jaas is not None else {}),
    }


def store_admin_credential(zookeeper_connect: str, files: SecurityFiles, timeout_s: float) -> None:
    """The admin user's SCRAM credentials in /config/users/admin, as kafka-configs.sh stores them.

    Called once the quorum has a leader and before the brokers start, so the admin logs in from the first
    connection; a second `zkraft up --secure` stores the recorded password again (new salts, same login).
    Written as the brokers' ZooKeeper user with Kafka's ACLs (after Kafka's top-level paths, each with its own),
    as an operator runs kafka-configs.sh with the brokers' JAAS file: /config/users is theirs alone."""
    sasl = broker_zookeeper_login(files) if files.zookeeper_jaas is not None else None
    default_acl = secure_default_acls if sasl is not None else None
    with ZkClient(zookeeper_connect, timeout=timeout_s, tls=files.admin_tls, sasl_options=sasl,
                  default_acl=default_acl) as zk:  # fmt: skip
        if sasl is not None:
            for path in PERSISTENT_PATHS:
                zk.ensure_path(path)
        for mechanism in SASL_MECHANISMS:
            store_scram_credential(zk, files.username, mechanism, files.password)
