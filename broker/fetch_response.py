"""Fetch responses put on the wire around the segment bytes (docs/DESIGN.md §4.6: fetches slice segment files).

Setting `records` on a protobuf message and serializing it copies every
fetched byte three times (into the message, into the encoder's buffer, into
the Python bytes gRPC is given), each into freshly allocated memory; on the
broker's one core that was three quarters of the CPU a large fetch costs.
Here the response is built without its records; each partition's record
bytes, read from the segment (one pread), are appended as field 6 of its
`FetchPartitionData`, and the enclosing messages get their length prefixes
by arithmetic: one `b"".join` copies the records into the answer. The bytes
are a valid `FetchResponse` (protobuf allows fields in any order), so every
client parses them as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkraft_proto import broker_pb2 as pb

# Wire tags (field number << 3 | wire type 2, length-delimited) of broker.proto's Fetch messages.
_RESPONSES_TAG = b"\x12"  # FetchResponse.responses = 2
_PARTITIONS_TAG = b"\x12"  # FetchableTopicResponse.partitions = 2
_RECORDS_TAG = b"\x32"  # FetchPartitionData.records = 6


@dataclass(slots=True)
class FetchReply:
    """A FetchResponse without records, and the records of its partitions keyed by (topic, partition) index."""

    response: pb.FetchResponse = field(default_factory=pb.FetchResponse)
    records: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def encode(self) -> bytes:
        if not self.records:
            return self.response.SerializeToString()
        head = pb.FetchResponse(error_code=self.response.error_code, throttle_time_ms=self.response.throttle_time_ms)
        pieces = [head.SerializeToString()]
        for t, topic in enumerate(self.response.responses):
            topic_pieces = [pb.FetchableTopicResponse(topic=topic.topic).SerializeToString()]
            for p, partition in enumerate(topic.partitions):
                value = [partition.SerializeToString()]
                data = self.records.get((t, p))
                if data:
                    _append_field(value, _RECORDS_TAG, [data])
                _append_field(topic_pieces, _PARTITIONS_TAG, value)
            _append_field(pieces, _RESPONSES_TAG, topic_pieces)
        return b"".join(pieces)


def _append_field(out: list[bytes], tag: bytes, value: list[bytes]) -> None:
    """Appends a length-delimited field whose value is the concatenation of `value`, without joining it."""
    out.append(tag)
    out.append(_varint(sum(len(v) for v in value)))
    out.extend(value)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
