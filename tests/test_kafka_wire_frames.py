"""Raw bytes against a live broker's Kafka listener: framing, limits and malformed requests.

What a Kafka operator relies on (Kafka 2.8 SocketServer): a frame larger than socket.request.max.bytes is
refused before its body is read; truncated, garbage and undecodable requests close that one connection and
the broker goes on serving everyone else; a client asking ApiVersions in a version the broker does not know
gets a v0 answer with UNSUPPORTED_VERSION and the table; pipelined requests are answered in request order.
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from broker.kafka_api.entities import build
from tests.helpers import wait_until
from tests.kafka_harness import KafkaCluster

pytestmark = pytest.mark.integration

REQUEST_MAX_BYTES = 1024 * 1024
SOCKET_TIMEOUT_S = 15.0
API_VERSIONS, METADATA, PRODUCE = 18, 3, 0
UNSUPPORTED_VERSION = 35


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    properties = {"socket.request.max.bytes": str(REQUEST_MAX_BYTES)}
    with KafkaCluster(tmp_path_factory.mktemp("kafka-wire"), brokers=1, broker_properties=properties) as kafka:
        kafka.start()
        yield kafka


@contextlib.contextmanager
def connected(cluster: KafkaCluster) -> Iterator[socket.socket]:
    host, port = cluster.kafka_address(1).rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)
    try:
        yield sock
    finally:
        sock.close()


def request_frame(api_key: int, api_version: int, correlation_id: int, body: object | None = None) -> bytes:
    """A request frame encoded by kio (header v1 or v2 as the version's flexibility says)."""
    request_type = load_request_schema(api_key, api_version)
    header_type = RequestHeaderV2 if request_type.__flexible__ else RequestHeaderV1
    buffer = io.BytesIO()
    header = header_type(
        request_api_key=api_key, request_api_version=api_version, correlation_id=correlation_id, client_id="wire-test"
    )
    entity_writer(header_type)(buffer, header)
    entity_writer(request_type)(buffer, body if body is not None else request_type())
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def metadata_request(api_version: int) -> object:
    """Metadata for every topic, in `api_version` (v1+: a null topic list)."""
    return build(
        load_request_schema(METADATA, api_version),
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError(f"closed after {len(chunks)} of {size} bytes")
        chunks += chunk
    return bytes(chunks)


def read_response(sock: socket.socket, api_key: int, api_version: int) -> tuple[int, object]:
    """(correlation id, decoded body) of one response; header v0, or v1 for flexible versions but ApiVersions."""
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    frame = read_exactly(sock, size)
    (correlation_id,) = struct.unpack_from(">i", frame)
    response_type = load_response_schema(api_key, api_version)
    offset = 5 if response_type.__flexible__ and api_key != API_VERSIONS else 4
    body, _ = entity_reader(response_type)(frame, offset)
    return correlation_id, body


def closed_by_broker(sock: socket.socket) -> bool:
    """True when the broker closes the connection (reads end) within the socket timeout."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def api_versions_work(cluster: KafkaCluster) -> bool:
    with connected(cluster) as sock:
        sock.sendall(request_frame(API_VERSIONS, 0, 99))
        correlation_id, body = read_response(sock, API_VERSIONS, 0)
    return correlation_id == 99 and int(body.error_code) == 0  # type: ignore[attr-defined]


def test_api_versions_in_every_served_version(cluster: KafkaCluster) -> None:
    for version in range(4):
        with connected(cluster) as sock:
            body = None
            if version >= 3:
                body = load_request_schema(API_VERSIONS, 3)(client_software_name="wire", client_software_version="1")
            sock.sendall(request_frame(API_VERSIONS, version, 7, body))
            correlation_id, response = read_response(sock, API_VERSIONS, version)
        assert correlation_id == 7
        assert int(response.error_code) == 0  # type: ignore[attr-defined]
        keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]
        assert keys[API_VERSIONS] == (0, 3)
        assert keys[METADATA] == (0, 11)


def test_api_versions_in_an_unknown_version_answers_v0_with_the_table(cluster: KafkaCluster) -> None:
    with connected(cluster) as sock:
        # ApiVersions v4 is newer than Kafka 2.8 serves (a header v2, as a newer client sends it).
        sock.sendall(request_frame(API_VERSIONS, 4, 11, load_request_schema(API_VERSIONS, 4)(
            client_software_name="newer", client_software_version="9")))  # fmt: skip
        correlation_id, response = read_response(sock, API_VERSIONS, 0)
        assert correlation_id == 11
        assert int(response.error_code) == UNSUPPORTED_VERSION  # type: ignore[attr-defined]
        assert any(k.api_key == METADATA for k in response.api_keys)  # type: ignore[attr-defined]
        # The connection stays open: the client downgrades and asks again.
        sock.sendall(request_frame(API_VERSIONS, 3, 12, load_request_schema(API_VERSIONS, 3)(
            client_software_name="newer", client_software_version="9")))  # fmt: skip
        assert read_response(sock, API_VERSIONS, 3)[0] == 12


def test_pipelined_requests_are_answered_in_request_order(cluster: KafkaCluster) -> None:
    requests = [(API_VERSIONS, 2) if i % 2 else (METADATA, 9) for i in range(40)]
    with connected(cluster) as sock:
        frames = [
            request_frame(key, version, 1000 + i, metadata_request(version) if key == METADATA else None)
            for i, (key, version) in enumerate(requests)
        ]
        sock.sendall(b"".join(frames))
        answered = [read_response(sock, key, version)[0] for key, version in requests]
    assert answered == [1000 + i for i in range(len(requests))]


def test_a_frame_above_socket_request_max_bytes_is_refused_before_its_body(cluster: KafkaCluster) -> None:
    with connected(cluster) as sock:
        sock.sendall(struct.pack(">i", REQUEST_MAX_BYTES + 1))  # the size alone: no body follows
        assert closed_by_broker(sock)
    wait_until(
        lambda: any(e.get("size_bytes") == REQUEST_MAX_BYTES + 1 for e in cluster.log_events(1, "kafka_frame_refused")),
        SOCKET_TIMEOUT_S,
        message="the refused frame was not logged",
    )
    [event] = [e for e in cluster.log_events(1, "kafka_frame_refused") if e.get("size_bytes") == REQUEST_MAX_BYTES + 1]
    assert event["peer"] == "127.0.0.1"
    assert api_versions_work(cluster)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">i", 0), id="zero-length"),
        pytest.param(struct.pack(">i", -5), id="negative-length"),
        pytest.param(struct.pack(">i", 4) + b"\0\x12\0\0", id="shorter-than-a-header"),
        pytest.param(struct.pack(">hhih", 999, 0, 1, -1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhih", 10, METADATA, 9, 1, -1), id="metadata-v9-without-a-body"),
        pytest.param(struct.pack(">ihhih", 14, METADATA, 1, 1, -1) + b"\xff\xff\xff\x7f", id="metadata-huge-array"),
        pytest.param(struct.pack(">ihhih", 10, PRODUCE, 2, 1, -1), id="produce-v2-no-schema"),
        pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64), id="tls-client-hello"),
    ],
)
def test_malformed_frames_close_only_their_connection(cluster: KafkaCluster, frame: bytes) -> None:
    if frame.startswith(struct.pack(">hh", 999, 0)):
        frame = struct.pack(">i", len(frame)) + frame
    with connected(cluster) as sock, connected(cluster) as bystander:
        sock.sendall(frame)
        assert closed_by_broker(sock)
        bystander.sendall(request_frame(API_VERSIONS, 1, 5))
        assert read_response(bystander, API_VERSIONS, 1)[0] == 5
    cluster.assert_alive(1)


def test_a_truncated_frame_then_a_hang_up_leaves_the_broker_serving(cluster: KafkaCluster) -> None:
    with connected(cluster) as sock:
        sock.sendall(request_frame(METADATA, 9, 3, metadata_request(9))[:9])
    assert api_versions_work(cluster)


def test_an_unsupported_version_with_a_top_level_error_is_answered(cluster: KafkaCluster) -> None:
    with connected(cluster) as sock:
        # DescribeCluster v1 is newer than Kafka 2.8 (v0 only); its response has a top-level error code.
        request = build(load_request_schema(60, 1), include_cluster_authorized_operations=False)
        sock.sendall(request_frame(60, 1, 21, request))
        correlation_id, response = read_response(sock, 60, 1)
        assert (correlation_id, int(response.error_code)) == (21, UNSUPPORTED_VERSION)  # type: ignore[attr-defined]
        sock.sendall(request_frame(API_VERSIONS, 0, 22))
        assert read_response(sock, API_VERSIONS, 0)[0] == 22


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    api_key=st.sampled_from([0, 1, 2, 3, 8, 9, 10, 11, 17, 18, 19, 22, 32, 60, 999]),
    api_version=st.integers(min_value=-1, max_value=15),
    tail=st.binary(max_size=200),
)
def test_random_frames_never_take_the_broker_down(
    cluster: KafkaCluster, api_key: int, api_version: int, tail: bytes
) -> None:
    payload = struct.pack(">hhi", api_key, api_version, 77) + tail
    with connected(cluster) as sock:
        sock.settimeout(2.0)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        with contextlib.suppress(OSError):
            sock.recv(65536)  # an answer or the close: either is fine, the broker must live on
    assert api_versions_work(cluster)
    # A request kio decoded must be answered by its handler, never crash it.
    assert cluster.log_events(1, "kafka_request_failed") == []
