"""The table of Kafka APIs the broker's Kafka listener serves, filled by the modules of this package.

Each API family lives in its own module (cluster.py, data.py, groups.py, admin.py) and registers one
handler per API key with `@kafka_api(key, name, min_version, max_version)`. A handler receives the
request kio decoded for the negotiated version and a `KafkaRequestContext`, and returns a response
entity of `context.response_type` (build it with `broker.kafka_api.entities.build`). The listener
(broker/kafka_listener.py) advertises exactly this table in ApiVersions.

Handlers translate: they turn the Kafka request into what the broker's own service below takes
(`context.service`, the same BrokerService the gRPC front end calls) and its answer back into the
Kafka response. Semantics live once, below both front ends.

How the listener runs them: the requests of one connection are handled concurrently (clients
pipeline), each handler started as its request is read, in arrival order, and the answers are written
in that order. A handler returns a kio response entity, an `EncodedResponse` (a body it encoded
itself, e.g. Fetch's records), or None when Kafka sends no response (Produce with acks=0); it raises
`CloseConnection` when Kafka closes the connection instead of answering. Any other exception is answered
as Kafka's KafkaApis.handleError does, with the API's error response (a `client.kafka.errors` error's code,
else UNKNOWN_SERVER_ERROR logged with its traceback, in every entity: broker/kafka_error_response.py).
A handler that waits (a delayed produce or fetch) calls `broker.request_bounds.release_request_bytes()`
first, as on gRPC.
To name a broker to a Kafka client (FindCoordinator, Metadata), use its endpoint on
`context.listener_name`: `context.service.metadata_cache.listener_endpoint(broker_id, listener_name)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# (request entity, context) -> response entity of context.response_type, an EncodedResponse, or None (no response)
Handler = Callable[[Any, "KafkaRequestContext"], Awaitable[Any]]


ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"  # Kafka's KafkaPrincipal.ANONYMOUS: a connection that did not authenticate


@dataclass(slots=True)
class KafkaConnectionState:
    """What one client connection has established so far, shared by the requests it sends.

    security_protocol: the listener's (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
    principal: who the connection authenticated as, in Kafka's `User:<name>` form (what ACLs name).
    authenticator: on a SASL_ listener, the connection's broker.sasl.authenticator.SaslAuthenticator (which
    sets `principal`); None elsewhere.
    """

    security_protocol: str = "PLAINTEXT"
    principal: str = ANONYMOUS_PRINCIPAL
    authenticator: Any = None


@dataclass(frozen=True, slots=True)
class KafkaRequestContext:
    service: Any  # broker.service.BrokerService: the broker's parts, shared with the gRPC front end
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str  # the peer's address, as Kafka's RequestContext.clientAddress
    listener_name: str  # the listener the request came in on (its endpoint is the one Metadata answers)
    response_type: type  # kio's response class for (api_key, api_version)
    connection: KafkaConnectionState = field(default_factory=KafkaConnectionState)


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body a handler encoded itself, in the negotiated version, without the size and header.

    For responses that carry records (Fetch): the listener writes `parts` as they are after the frame's size
    and header (one `writelines`), so record bytes read from the log are not copied into one buffer first.
    """

    parts: Sequence[bytes | memoryview]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


API_SPECS: dict[int, ApiSpec] = {}


def kafka_api(key: int, name: str, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Registers the decorated coroutine as the handler of API `key` for versions min..max (both inclusive).

    The range is what Kafka 2.8 serves intersected with what kio has schemas for; a second registration of a
    key is a programming error.
    """

    def register(handler: Handler) -> Handler:
        if key in API_SPECS:
            raise ValueError(f"Kafka API {key} ({name}) is registered twice")
        if not 0 <= min_version <= max_version:
            raise ValueError(f"Kafka API {key} ({name}): bad version range {min_version}..{max_version}")
        API_SPECS[key] = ApiSpec(key, name, min_version, max_version, handler)
        return handler

    return register


class CloseConnection(Exception):
    """Raised by a handler when Kafka closes the connection instead of answering: a Produce with acks=0 that
    failed on some partition (Kafka 2.8 KafkaApis.handleProduceRequest: "the server will close socket server so
    that the producer client will know that some error has happened and will refresh its metadata"). The
    message names the failure for the broker's log (one warning, no traceback: it is the client's failure, not
    the broker's)."""
