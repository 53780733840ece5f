"""The register map's one command, "set key to value": its bytes, shared by the map and its client.

The bare quorum (`quorum.state.machine=register`) replicates these commands
into `quorum.state_machine.RegisterMap`; `quorum.register_client` builds them.
A 2-byte big-endian key length, the key, then the value to its end.
"""

from __future__ import annotations

import struct

_KEY_LEN = struct.Struct(">H")
KEY_BYTES_MAX = 0xFFFF


def encode_set(key: bytes, value: bytes) -> bytes:
    """The register map's command: set `key` to `value`."""
    if len(key) > KEY_BYTES_MAX:
        raise ValueError(f"key of {len(key)} bytes is longer than {KEY_BYTES_MAX}")
    return _KEY_LEN.pack(len(key)) + key + value


def decode_set(command: bytes) -> tuple[bytes, bytes]:
    (n,) = _KEY_LEN.unpack_from(command)
    return command[2 : 2 + n], command[2 + n :]
