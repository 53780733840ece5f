"""The one place a gRPC channel is opened or a gRPC port added: with TLS when a TlsConfig is given, plaintext when not.

Every server and client of ours (quorum peers, zkemu, brokers, the SDK, the tools) goes through these, so
that turning TLS on is one setting and not a copy per call site. With `tls=None` they are exactly
`grpc.aio.insecure_channel` / `add_insecure_port`: nothing is added on the plaintext path.

`explain_failure` turns gRPC's UNAVAILABLE of a TLS mismatch into one line a user can act on, since
gRPC reports a plaintext client on a TLS port only as "Socket closed" (the server drops a connection
whose first bytes are not a TLS record) and a TLS client on a plaintext port as a handshake failure.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Sequence

import grpc

from runtime.tls import TlsConfig

Options = Sequence[tuple[str, object]]
# How long the probe that tells a TLS port from a closed connection may take: it runs only after a failure.
_PROBE_TIMEOUT_S = 1.0


def aio_channel(address: str, tls: TlsConfig | None, options: Options = ()) -> grpc.aio.Channel:
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, tls.grpc_channel_credentials(), options=list(options))


def sync_channel(address: str, tls: TlsConfig | None, options: Options = ()) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, tls.grpc_channel_credentials(), options=list(options))


def add_port(server: grpc.aio.Server | grpc.Server, address: str, tls: TlsConfig | None) -> int:
    """Bind `address` on `server`, with TLS when `tls` is given; the bound port (RuntimeError if it cannot bind)."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, tls.grpc_server_credentials())


def explain_failure(address: str, tls: TlsConfig | None, details: str) -> str | None:
    """One line saying why a connection to `address` failed when the cause is TLS; None for any other cause."""
    if "handshake failed" in details.lower():
        if "WRONG_VERSION_NUMBER" in details:
            return f"{address} does not speak TLS: it is a plaintext port (security.protocol=PLAINTEXT reaches it)"
        if "CERTIFICATE_VERIFY_FAILED" in details:
            trusted = tls.truststore_file if tls is not None else "the truststore"
            return f"{address} presented a certificate not signed by a CA in {trusted} (ssl.truststore.location)"
        return f"{address}: TLS handshake failed: {_handshake_reason(details)}"
    if "Socket closed" not in details and "Connection reset" not in details:
        return None
    if tls is None:
        if speaks_tls(address):
            return (
                f"{address} is a TLS port and this client connects in plaintext: set security.protocol=SSL and "
                "ssl.truststore.location (zookeeper.client.secure=true for a ZooKeeper client)"
            )
        return None
    if speaks_tls(address):
        return (
            f"{address} closed the connection after the TLS handshake: it requires a client certificate "
            "signed by its CA (ssl.keystore.location)"
        )
    return None


def is_permanent(tls: TlsConfig | None, details: str, certificate_required: bool = False) -> bool:
    """Whether a failure explain_failure explained can never go away by retrying, so a client may give up at once.

    A failed handshake (a certificate not trusted, a plaintext port) and a plaintext client on a port that
    speaks TLS are permanent. A TLS connection closed after the handshake is ambiguous (the server may be
    stopping, or it refused our certificate) unless the client has no certificate for a server that
    always requires one (`certificate_required`: the quorum's TLS port)."""
    if "handshake failed" in details.lower() or tls is None:
        return True
    return certificate_required and tls.keystore_file is None


def _handshake_reason(details: str) -> str:
    marker = "SSL routines:OPENSSL_internal:"
    start = details.find(marker)
    return details[start + len(marker) :].split(":")[0] if start >= 0 else details.rsplit("last error: ", 1)[-1]


def speaks_tls(address: str) -> bool:
    """Whether the server at `address` answers a TLS ClientHello with a handshake (certificates not checked)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=_PROBE_TIMEOUT_S) as raw:
            with context.wrap_socket(raw, server_hostname=host or None):
                return True
    except ssl.SSLError as exc:
        # Only a TLS alert proves a TLS server (one that refused our certificate); a closed connection
        # (an EOF) or bytes that are not TLS records come from a plaintext server too.
        return "ALERT" in str(exc).upper()
    except (OSError, ValueError):
        return False
