"""Kafka's request and response frames, decoded and encoded with kio (the listener's codec, no I/O here).

A request frame is an int32 size, a request header and a body; a response frame an int32 size, a response
header and a body (Kafka protocol guide, "Common Request and Response Structure"). The request header is
v1, or v2 for the flexible versions of an API (KIP-482: client id, then tagged fields); the response header
v0 (correlation id), or v1 for flexible versions (then tagged fields), EXCEPT ApiVersions whose responses
always use v0: a client reads them before it knows which versions the broker speaks (KIP-511).

kio's readers and writers are built once per (API key, version) and cached (`codec_for`).

`unserved_codec` decodes a known API in a version the broker does not serve, when kio has its schemas, so that
the listener can answer it in the API's own response (broker/kafka_error_response.py); a version kio has no
schema for can be neither read nor answered.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from broker.kafka_api.registry import API_SPECS, ApiSpec, EncodedResponse
from broker.kafka_error_response import RequestError, error_response

SIZE = struct.Struct(">i")
# api key, api version, correlation id: how every request header begins, in every version.
HEADER_START = struct.Struct(">hhi")
_RESPONSE_HEADER_V0 = struct.Struct(">i")  # correlation id
_RESPONSE_HEADER_V1 = struct.Struct(">iB")  # correlation id, an empty tagged-field section
API_VERSIONS_KEY = 18
# A request header v1 with a null client id: api key, api version, correlation id, client id length -1.
REQUEST_BYTES_MIN = 10

Frame = list[bytes | memoryview]


@dataclass(frozen=True, slots=True)
class Codec:
    """What one served (API key, version) needs: its handler, kio's readers and writer, its header versions."""

    spec: ApiSpec
    read_header: Any  # kio reader: (buffer, offset) -> (RequestHeader, offset after it)
    read_request: Any  # kio reader: (buffer, offset) -> (request entity, offset after it)
    response_type: type
    write_response: Callable[[Any, Any], None]
    response_header: struct.Struct


_CODECS: dict[tuple[int, int], Codec] = {}


def codec_for(api_key: int, api_version: int) -> Codec | None:
    """The cached codec of a served (key, version), or None when the broker does not serve it."""
    codec = _CODECS.get((api_key, api_version))
    if codec is not None:
        return codec
    spec = API_SPECS.get(api_key)
    if spec is None or not spec.min_version <= api_version <= spec.max_version:
        return None
    request_type = load_request_schema(api_key, api_version)
    response_type = load_response_schema(api_key, api_version)
    flexible = bool(request_type.__flexible__)
    codec = Codec(
        spec=spec,
        read_header=entity_reader(RequestHeaderV2 if flexible else RequestHeaderV1),
        read_request=entity_reader(request_type),
        response_type=response_type,
        write_response=entity_writer(response_type),
        response_header=_response_header(api_key, flexible),
    )
    _CODECS[(api_key, api_version)] = codec
    return codec


def _response_header(api_key: int, flexible: bool) -> struct.Struct:
    return _RESPONSE_HEADER_V1 if flexible and api_key != API_VERSIONS_KEY else _RESPONSE_HEADER_V0


def encode_response(codec: Codec, correlation_id: int, response: Any) -> Frame:
    """The response frame: size, header, body (an EncodedResponse's buffers are written as they are); no bytes
    at all for None (a request Kafka does not answer)."""
    if response is None:
        return []
    header = codec.response_header
    header_bytes = header.pack(correlation_id) if header is _RESPONSE_HEADER_V0 else header.pack(correlation_id, 0)
    if isinstance(response, EncodedResponse):
        parts = response.parts
        body_bytes = sum(len(p) for p in parts)
        return [SIZE.pack(len(header_bytes) + body_bytes) + header_bytes, *parts]
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(header_bytes)
    codec.write_response(buffer, response)
    frame = buffer.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - 4)
    return [frame]


# Codecs of unserved versions, only those kio has schemas for: at most kio's versions of the served APIs (a
# client's made-up versions are not remembered, so they cannot grow it).
_UNSERVED_CODECS: dict[tuple[int, int], Codec] = {}


def unserved_codec(api_key: int, api_version: int) -> Codec | None:
    """The codec of a known API in a version the broker does not serve but kio has schemas for (to decode the
    request and write the API's error response in that version), or None: an unknown key, or no schema."""
    codec = _UNSERVED_CODECS.get((api_key, api_version))
    if codec is not None:
        return codec
    spec = API_SPECS.get(api_key)
    if spec is None:
        return None
    try:
        request_type = load_request_schema(api_key, api_version)
        response_type = load_response_schema(api_key, api_version)
    except (KioIndexError, KeyError):
        return None
    flexible = bool(request_type.__flexible__)
    codec = Codec(
        spec=spec,
        read_header=entity_reader(RequestHeaderV2 if flexible else RequestHeaderV1),
        read_request=entity_reader(request_type),
        response_type=response_type,
        write_response=entity_writer(response_type),
        response_header=_response_header(api_key, flexible),
    )
    _UNSERVED_CODECS[(api_key, api_version)] = codec
    return codec


def error_frame(codec: Codec, correlation_id: int, request: Any, error: RequestError) -> Frame | None:
    """The API's own response to `request` with `error` in each of its entities (Kafka's getErrorResponse), or
    None when Kafka sends no response (a Produce with acks=0: the connection is closed instead)."""
    response = error_response(codec.spec.key, codec.response_type.__version__, request, codec.response_type, error)
    return None if response is None else encode_response(codec, correlation_id, response)


def api_versions_fallback(correlation_id: int, response: Any) -> Frame:
    """An ApiVersions v0 frame (the answer to an ApiVersions request in a version the broker does not know)."""
    codec = codec_for(API_VERSIONS_KEY, 0)
    assert codec is not None
    return encode_response(codec, correlation_id, response)


def frame_bytes(frame: Sequence[bytes | memoryview]) -> bytes:
    """A frame as one bytes object (tests and logs)."""
    return b"".join(bytes(part) for part in frame)
