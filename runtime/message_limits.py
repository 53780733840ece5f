"""Sizes of a ZooKeeper session-stream message that the client SDK and the servers both hold to.

Both sides import them from here so that a server never imports the client
SDK for a constant (runtime/ is below both).
"""

from __future__ import annotations

# ZooKeeper's jute.maxbuffer default: the largest request a server reads (a larger packet closes the
# connection, NIOServerCnxn.readLength). The SDK refuses a larger request itself and sends no stream
# message larger than this (a batch is cut before it), so that a server with the default takes every one.
JUTE_MAX_BUFFER_BYTES_DEFAULT = 0xFFFFF
# What a server allows on top of jute.maxbuffer for the stream message around a request (ClientMessage,
# RequestBatch headers), so that a request of exactly jute.maxbuffer bytes still fits.
ENVELOPE_BYTES_MAX = 4096
