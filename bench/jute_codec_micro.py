"""CPU per request of the ZooKeeper wire codec (zkemu.jute_codec), no server, no socket.

    python3 bench/jute_codec_micro.py [--repeat 7] [--number 20000]

For each common request (the records kazoo and ZooKeeper's Java client send), the time to decode
one frame into the core's request and to encode its reply frame, in microseconds: the fastest of
`--repeat` timings of `--number` calls each (the machine may be shared: the fastest run is the one least disturbed).
Output: JSON lines, one per opcode.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kazoo.protocol import serialization as kz  # noqa: E402
from kazoo.security import OPEN_ACL_UNSAFE  # noqa: E402

from zkemu import jute_codec as jute  # noqa: E402
from zkemu.server_stats import ServerStats  # noqa: E402
from zkraft_proto import zk_pb2  # noqa: E402

PATH = "/bench/node-0000012345"
STAT = zk_pb2.Stat(czxid=5, mzxid=6, ctime=7, mtime=8, version=1, data_length=100, num_children=0, pzxid=9)
VALUE = b"v" * 100


def cases() -> list[tuple[str, object, zk_pb2.Response]]:
    """(name, kazoo request record, the core's successful reply)."""
    return [
        ("getData", kz.GetData(PATH, False), zk_pb2.Response(xid=7, zxid=99, data=VALUE, stat=STAT)),
        ("exists", kz.Exists(PATH, True), zk_pb2.Response(xid=7, zxid=99, exists=True, stat=STAT)),
        ("setData", kz.SetData(PATH, VALUE, -1), zk_pb2.Response(xid=7, zxid=99, stat=STAT)),
        ("create", kz.Create(PATH, VALUE, OPEN_ACL_UNSAFE, 0), zk_pb2.Response(xid=7, zxid=99, path=PATH)),
        (
            "create2",
            kz.Create2(PATH, VALUE, OPEN_ACL_UNSAFE, 2),
            zk_pb2.Response(xid=7, zxid=99, path=PATH, stat=STAT),
        ),
        ("delete", kz.Delete(PATH, -1), zk_pb2.Response(xid=7, zxid=99)),
        ("getChildren2", kz.GetChildren2(PATH, False), zk_pb2.Response(xid=7, zxid=99, children=["a", "b"], stat=STAT)),
        ("ping", kz.Ping, zk_pb2.Response(xid=-2, zxid=99)),
    ]


def frame_of(request: object) -> tuple[int, bytes]:
    body = b"" if request is kz.Ping else request.serialize()  # type: ignore[attr-defined]
    return request.type, struct.pack(">ii", 7, request.type) + body  # type: ignore[attr-defined]


def measure(func, repeat: int, number: int) -> float:
    return min(timeit.repeat(func, repeat=repeat, number=number)) / number * 1e6


def timings(request: object, resp: zk_pb2.Response, stats: object, repeat: int, number: int) -> tuple[float, float]:
    """(decode us, encode us) of one request and its reply."""
    opcode, payload = frame_of(request)
    reader = jute.JuteReader()

    def decode() -> None:
        reader.reset(payload, 0, len(payload))
        jute.decode_request(reader, zk_pb2.Request())

    encoder = jute.JuteEncoder(stats)  # type: ignore[arg-type]
    message = zk_pb2.ServerMessage(response=resp)

    def encode() -> None:
        encoder.expect(opcode, 0.0)
        encoder.encode(message, [])

    return measure(decode, repeat, number), measure(encode, repeat, number)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    stats = ServerStats().connection_opened("127.0.0.1:1")
    for name, request, resp in cases():
        decode_us, encode_us = timings(request, resp, stats, args.repeat, args.number)
        print(json.dumps({"op": name, "decode_us": round(decode_us, 2), "encode_us": round(encode_us, 2)}))


if __name__ == "__main__":
    main()
