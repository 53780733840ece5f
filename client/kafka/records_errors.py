"""The record-format errors, shared by the batch codec (client.kafka.records) and the compression codecs."""

from __future__ import annotations


class RecordsError(Exception):
    """Base of the record-format errors."""


class CorruptRecordError(RecordsError):
    """Bad framing, magic, CRC, counts or compressed data; the broker answers Kafka's CORRUPT_MESSAGE (code 2)."""


class UnsupportedCompressionError(RecordsError):
    """A codec id Kafka does not define (attributes bits 0-2 above 4)."""
