"""Kafka's four record-batch codecs, framed as Kafka's clients write them, decoded with a bound.

One compress / decompress pair per codec, all through cramjam (docs/research/kafka.md
§3.8; Kafka 2.8 `CompressionType.java`):

* gzip: a gzip member at the default level, as `GZIPOutputStream` writes it.
* snappy: written in the xerial framing of snappy-java's `SnappyOutputStream`
  (the Java client's format: a 16-byte header, then length-prefixed raw snappy
  blocks of 32 KiB); read in both that framing and as one raw snappy block,
  which is what librdkafka writes (rdkafka_msgset_writer.c) and what
  `SnappyInputStream` also accepts.
* lz4: an LZ4 frame as `KafkaLZ4BlockOutputStream` writes it for magic >= 1:
  version 01, independent 64 KiB blocks, no checksums, no content size, and the
  header checksum computed correctly (magic 0's broken one is not ours to write).
  Any standard frame is read (librdkafka's lz4frame, python-lz4's linked blocks).
* zstd: one zstd frame.

Decompression is bounded: before inflating, the frame structure gives an upper
bound on the output (snappy's length preamble, LZ4's and zstd's block counts
times their maximum block size; gzip is inflated with `max_length`), and a
batch whose bound exceeds `decompressed_bytes_max` is a CorruptRecordError, so
a few hundred compressed bytes claiming gigabytes cannot exhaust memory.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from client.kafka.records_errors import CorruptRecordError, UnsupportedCompressionError

# Codec ids: attributes bits 0-2 of a v2 batch (Kafka's CompressionType.id).
NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

# The largest records section one batch may inflate to. Kafka has no such
# property (its limit is the JVM heap); 256 MiB is far above any batch a
# producer builds (batch.size 16 KiB, message.max.bytes ~1 MiB, even at 100x).
DECOMPRESSED_BYTES_MAX_DEFAULT = 256 * 1024 * 1024

_GZIP_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION
_GZIP_WBITS = 31  # zlib with a gzip header and trailer
_GZIP_MAGIC = b"\x1f\x8b\x08"  # RFC 1952: ID1, ID2, CM = deflate
_DEFLATE_RATIO_MAX = 1032  # deflate's largest expansion (zlib's FAQ): no gzip body inflates beyond this

# snappy-java SnappyCodec: magic, then version and minimum compatible version, both 1.
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE
_INT32_BE = struct.Struct(">i")

_LZ4_MAGIC = 0x184D2204
_LZ4_FLG = 0x60  # version 01, block independence; no checksums, content size or dictionary
_LZ4_BD = 0x40  # block maximum size 64 KiB (Kafka's BLOCKSIZE_64KB)
_LZ4_BLOCK_BYTES = 64 * 1024
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_UINT32_LE = struct.Struct("<I")

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_BYTES_MAX = 128 * 1024  # RFC 8878 §3.1.1.2.3 Block_Maximum_Size
_SKIPPABLE_MAGIC_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50  # lz4 and zstd share skippable frames


def codec_name(codec: int) -> str:
    """'gzip' for 1 and so on; the number itself for a codec Kafka does not define."""
    return CODEC_NAMES[codec] if 0 <= codec < len(CODEC_NAMES) else str(codec)


def compress(codec: int, data: bytes) -> bytes:
    """The records section compressed with `codec` (NONE returns it unchanged)."""
    if codec == NONE:
        return data
    if codec == GZIP:
        compressor = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return _lz4_frame_compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, body: bytes | memoryview, *, decompressed_bytes_max: int) -> bytes:
    """The records section inflated; CorruptRecordError on bad data or a bound above the limit."""
    if codec == NONE:
        return bytes(body)
    name = codec_name(codec)
    if codec == GZIP:
        return _gunzip(body, decompressed_bytes_max)
    try:
        if codec == SNAPPY:
            return _snappy_decompress(body, decompressed_bytes_max)
        if codec == LZ4:
            _check_bound(name, _lz4_bound_bytes(body, decompressed_bytes_max), decompressed_bytes_max)
            return bytes(cramjam.lz4.decompress(body))
        if codec == ZSTD:
            _check_bound(name, _zstd_bound_bytes(body, decompressed_bytes_max), decompressed_bytes_max)
            return bytes(cramjam.zstd.decompress(body))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{name}: {exc}") from None
    except (IndexError, struct.error):
        raise CorruptRecordError(f"{name}: frame truncated") from None
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def inflated_bytes_bound(codec: int, body: bytes | memoryview, limit_bytes: int) -> int:
    """The most bytes a compressed records section can inflate to, from its frame structure alone.

    No inflation (which costs more than the rest of an append): gzip's magic and the deflate ratio limit,
    snappy's length preambles, lz4's and zstd's frame magic and block lists. Raises CorruptRecordError for a
    frame that is not the codec's, is truncated, or may inflate beyond `limit_bytes`; a frame that passes
    may still fail to inflate (damage inside a block): readers refuse it then.
    """
    name = codec_name(codec)
    try:
        if codec == GZIP:
            if bytes(body[:3]) != _GZIP_MAGIC:
                raise CorruptRecordError("gzip: not a gzip stream (bad magic)")
            bound = len(body) * _DEFLATE_RATIO_MAX
        elif codec == SNAPPY:
            bound = _snappy_size_bytes(memoryview(body))
        elif codec == LZ4:
            bound = _lz4_bound_bytes(body, limit_bytes)
        elif codec == ZSTD:
            bound = _zstd_bound_bytes(body, limit_bytes)
        else:
            raise UnsupportedCompressionError(f"unknown compression codec {codec}")
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{name}: {exc}") from None
    except (IndexError, struct.error):
        raise CorruptRecordError(f"{name}: frame truncated") from None
    _check_bound(name, bound, limit_bytes)
    return bound


def _check_bound(name: str, bound_bytes: int, limit_bytes: int) -> None:
    if bound_bytes > limit_bytes:
        raise CorruptRecordError(
            f"{name}: records would inflate to up to {bound_bytes} bytes, above the limit of {limit_bytes}"
        )


# --------------------------------------------------------------------------- gzip


def _gunzip(body: bytes | memoryview, limit_bytes: int) -> bytes:
    """Every gzip member (GZIPInputStream reads concatenated members too), at most `limit_bytes`."""
    out: list[bytes] = []
    size = 0
    rest = bytes(body)
    try:
        while rest:
            inflater = zlib.decompressobj(_GZIP_WBITS)
            chunk = inflater.decompress(rest, limit_bytes - size + 1)
            size += len(chunk)
            _check_bound("gzip", size, limit_bytes)
            if not inflater.eof:
                raise CorruptRecordError("gzip: stream truncated")
            out.append(chunk)
            rest = inflater.unused_data
    except zlib.error as exc:
        raise CorruptRecordError(f"gzip: {exc}") from None
    return b"".join(out)


# --------------------------------------------------------------------------- snappy


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_INT32_BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_size_bytes(data: memoryview) -> int:
    """The inflated size from the length preambles: one raw block, or each block of the xerial framing."""
    if bytes(data[:8]) != _XERIAL_HEADER[:8]:
        return cramjam.snappy.decompress_raw_len(data)
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        (length,) = _INT32_BE.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptRecordError(f"snappy: xerial block of {length} bytes overruns the batch")
        total += cramjam.snappy.decompress_raw_len(data[pos : pos + length])
        pos += length
    return total


def _snappy_decompress(body: bytes | memoryview, limit_bytes: int) -> bytes:
    data = bytes(body)
    if not data.startswith(_XERIAL_HEADER[:8]):
        _check_bound("snappy", cramjam.snappy.decompress_raw_len(data), limit_bytes)
        return bytes(cramjam.snappy.decompress_raw(data))
    blocks = []
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        (length,) = _INT32_BE.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptRecordError(f"snappy: xerial block of {length} bytes overruns the batch")
        block = data[pos : pos + length]
        total += cramjam.snappy.decompress_raw_len(block)
        _check_bound("snappy", total, limit_bytes)
        blocks.append(block)
        pos += length
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)


# --------------------------------------------------------------------------- lz4


def _lz4_frame_compress(data: bytes) -> bytes:
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    # The header checksum is the second byte of xxh32(FLG, BD) (LZ4 frame format, "HC").
    parts = [_UINT32_LE.pack(_LZ4_MAGIC), descriptor, bytes((_xxh32(descriptor) >> 8 & 0xFF,))]
    view = memoryview(data)
    for start in range(0, len(data), _LZ4_BLOCK_BYTES):
        raw = view[start : start + _LZ4_BLOCK_BYTES]
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):  # incompressible: store it, as KafkaLZ4BlockOutputStream does
            parts.append(_UINT32_LE.pack(len(raw) | _LZ4_UNCOMPRESSED_BIT))
            parts.append(bytes(raw))
        else:
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
    parts.append(_UINT32_LE.pack(0))  # end mark
    return b"".join(parts)


def _lz4_bound_bytes(data: bytes | memoryview, limit_bytes: int) -> int:
    """Upper bound of the frames' output: stored blocks exactly, compressed ones at the block maximum."""
    pos = 0
    total = 0
    while pos < len(data) and total <= limit_bytes:
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & _SKIPPABLE_MAGIC_MASK == _SKIPPABLE_MAGIC:
            pos += 8 + _UINT32_LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _LZ4_MAGIC:
            raise CorruptRecordError(f"lz4: bad frame magic {magic:#x}")
        flg, bd = data[pos + 4], data[pos + 5]
        block_max = _LZ4_BLOCK_SIZES.get(bd >> 4 & 7)
        if block_max is None:
            raise CorruptRecordError(f"lz4: bad block maximum size in descriptor {bd:#x}")
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        block_checksum_bytes = 4 if flg & 0x10 else 0
        while total <= limit_bytes:
            (word,) = _UINT32_LE.unpack_from(data, pos)
            pos += 4
            if word == 0:
                break
            size = word & ~_LZ4_UNCOMPRESSED_BIT
            total += size if word & _LZ4_UNCOMPRESSED_BIT else block_max
            pos += size + block_checksum_bytes
        pos += 4 if flg & 0x04 else 0  # content checksum
    if pos > len(data):
        raise CorruptRecordError(f"lz4: the last block overruns the batch by {pos - len(data)} bytes")
    return total


_XXH_P1, _XXH_P2, _XXH_P3, _XXH_P4, _XXH_P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_MASK32 = 0xFFFFFFFF


def _xxh32(data: bytes) -> int:
    """xxHash32, seed 0, of fewer than 4 bytes: all the LZ4 frame header checksum needs here."""
    if len(data) >= 4:
        raise ValueError("_xxh32 only hashes inputs shorter than 4 bytes")
    h = (_XXH_P5 + len(data)) & _MASK32
    for byte in data:
        h = (h + byte * _XXH_P5) & _MASK32
        h = ((h << 11 | h >> 21) & _MASK32) * _XXH_P1 & _MASK32
    h ^= h >> 15
    h = h * _XXH_P2 & _MASK32
    h ^= h >> 13
    h = h * _XXH_P3 & _MASK32
    h ^= h >> 16
    return h


# --------------------------------------------------------------------------- zstd


def _zstd_bound_bytes(data: bytes | memoryview, limit_bytes: int) -> int:
    """Upper bound of the frames' output from their block headers (RFC 8878 §3.1.1)."""
    pos = 0
    total = 0
    while pos < len(data) and total <= limit_bytes:
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & _SKIPPABLE_MAGIC_MASK == _SKIPPABLE_MAGIC:
            pos += 8 + _UINT32_LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"zstd: bad frame magic {magic:#x}")
        descriptor = data[pos + 4]
        single_segment = descriptor >> 5 & 1
        content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + content_size_bytes
        while total <= limit_bytes:
            header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            pos += 3
            block_type, block_size = header >> 1 & 3, header >> 3
            if block_type == 3:
                raise CorruptRecordError("zstd: reserved block type")
            total += _ZSTD_BLOCK_BYTES_MAX if block_type == 2 else block_size
            pos += 1 if block_type == 1 else block_size
            if header & 1:
                break
        pos += 4 if descriptor & 0x04 else 0  # content checksum
    if pos > len(data):
        raise CorruptRecordError(f"zstd: the last block overruns the batch by {pos - len(data)} bytes")
    return total
