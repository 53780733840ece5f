"""The latency floor of this machine for a replicated write: a gRPC round trip and a contended fsync.

    python3 bench/latency_floor.py               # prints one JSON line
    python3 bench/latency_floor.py --round-trips 5000

A ZooKeeper create through zkraft needs at least two gRPC round trips between
processes (client <-> leader, leader <-> follower) and one fsync taken while
the other two nodes fsync the same disk; a watch event needs about half a
round trip more (leader -> the watcher's node -> the watcher). This script
measures those pieces alone, with nothing of zkraft in the way (on the event
loop zkraft's processes use, `runtime/event_loop.py`), so that the
ZooKeeper benchmark can say how much of its latency is the machine's and how
much is ours:

| field | what |
|---|---|
| `grpc_stream_rtt_p50_ms` | a message and its echo on one grpc.aio bidirectional stream between two processes |
| `grpc_unary_rtt_p50_ms` | one grpc.aio unary call between two processes |
| `tcp_rtt_p50_ms` | the same echo on a plain asyncio TCP connection (what gRPC costs on top) |
| `fsync_3_concurrent_p50_ms` | a write-ahead log append + fdatasync (a Raft save), 3 processes on one disk |
| `create_floor_ms` | 2 x stream round trip + contended fsync |
| `watch_fire_floor_ms` | 2.5 x stream round trip + contended fsync |

zk_bench.py runs it once per run and reports it beside its own figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runtime import event_loop  # the loop zkraft's own processes run on

ECHO_SERVICE = "zkraft.bench.Echo"
WARMUP_ROUND_TRIPS = 200
SERVER_START_TIMEOUT_S = 20.0
FSYNC_PROCESSES = 3
FSYNC_WRITES = 1000
PAYLOAD = b"x" * 200


def _identity(b: bytes) -> bytes:
    return b


# ---------------------------------------------------------------- the echo server (a child process)
async def serve(port_file: Path) -> None:
    import grpc

    async def stream(requests: Any, _context: Any) -> Any:
        async for message in requests:
            yield message

    async def unary(request: bytes, _context: Any) -> bytes:
        return request

    async def tcp_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)

    server = grpc.aio.server()
    handlers = {
        "Stream": grpc.stream_stream_rpc_method_handler(stream, _identity, _identity),
        "Unary": grpc.unary_unary_rpc_method_handler(unary, _identity, _identity),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO_SERVICE, handlers),))
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    tcp = await asyncio.start_server(tcp_echo, "127.0.0.1", 0)
    tcp_port = tcp.sockets[0].getsockname()[1]
    port_file.write_text(json.dumps({"grpc": grpc_port, "tcp": tcp_port}))
    await server.wait_for_termination()


# ---------------------------------------------------------------- round trips (this process)
def _p50_ms(samples_s: list[float]) -> float:
    return round(statistics.median(samples_s) * 1000, 3)


async def _round_trips(grpc_port: int, tcp_port: int, count: int) -> dict[str, float]:
    import grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        call = channel.stream_stream(f"/{ECHO_SERVICE}/Stream", _identity, _identity)()
        stream: list[float] = []
        for i in range(WARMUP_ROUND_TRIPS + count):
            t0 = time.perf_counter()
            await call.write(PAYLOAD)
            await call.read()
            if i >= WARMUP_ROUND_TRIPS:
                stream.append(time.perf_counter() - t0)
        await call.done_writing()
        unary_call = channel.unary_unary(f"/{ECHO_SERVICE}/Unary", _identity, _identity)
        unary: list[float] = []
        for i in range(WARMUP_ROUND_TRIPS + count):
            t0 = time.perf_counter()
            await unary_call(PAYLOAD)
            if i >= WARMUP_ROUND_TRIPS:
                unary.append(time.perf_counter() - t0)
    reader, writer = await asyncio.open_connection("127.0.0.1", tcp_port)
    tcp: list[float] = []
    for i in range(WARMUP_ROUND_TRIPS + count):
        t0 = time.perf_counter()
        writer.write(PAYLOAD)
        await reader.readexactly(len(PAYLOAD))
        if i >= WARMUP_ROUND_TRIPS:
            tcp.append(time.perf_counter() - t0)
    writer.close()
    return {
        "grpc_stream_rtt_p50_ms": _p50_ms(stream),
        "grpc_unary_rtt_p50_ms": _p50_ms(unary),
        "tcp_rtt_p50_ms": _p50_ms(tcp),
    }


def round_trip_figures(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="zkraft-floor-") as tmp:
        port_file = Path(tmp) / "ports.json"
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file)])
        try:
            deadline = time.monotonic() + SERVER_START_TIMEOUT_S
            while not port_file.exists() or not port_file.read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the echo server did not start")
                time.sleep(0.01)  # polling for the file, bounded by the deadline
            ports = json.loads(port_file.read_text())
            return event_loop.run(_round_trips(ports["grpc"], ports["tcp"], count))
        finally:
            server.kill()
            server.wait()


# ---------------------------------------------------------------- contended fsync
def fsync_writer(data_dir: Path, writes: int) -> None:
    """One of the concurrent writers: a save made durable as quorum.lmdb_log_store does (one
    write-ahead log append and fdatasync; the LMDB checkpoints every megabyte are not timed)."""
    from quorum.wal import WriteAheadLog

    wal = WriteAheadLog(data_dir)
    wal.reset()
    samples = []
    for _ in range(writes):
        t0 = time.perf_counter()
        wal.append(PAYLOAD, sync=True)
        samples.append(time.perf_counter() - t0)
    wal.close()
    print(json.dumps(_p50_ms(samples)))


def fsync_figure(parent: Path | None) -> float:
    with tempfile.TemporaryDirectory(prefix="zkraft-fsync-", dir=parent) as tmp:
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--fsync-writer", str(Path(tmp) / f"w{k}")], stdout=subprocess.PIPE
            )
            for k in range(FSYNC_PROCESSES)
        ]
        p50s = [float(p.communicate()[0]) for p in procs]
    return round(statistics.median(p50s), 3)


def measure(round_trips: int = 2000, data_parent: Path | None = None) -> dict[str, Any]:
    figures: dict[str, Any] = {"measure": "latency_floor", **round_trip_figures(round_trips)}
    figures["fsync_3_concurrent_p50_ms"] = fsync_figure(data_parent)
    rtt, fsync = figures["grpc_stream_rtt_p50_ms"], figures["fsync_3_concurrent_p50_ms"]
    figures["create_floor_ms"] = round(2 * rtt + fsync, 3)
    figures["watch_fire_floor_ms"] = round(2.5 * rtt + fsync, 3)
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--round-trips", type=int, default=2000, help="timed round trips per transport (default 2000)")
    p.add_argument("--dir", type=Path, default=None, help="parent directory for the fsync files (default: temp)")
    p.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--fsync-writer", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        event_loop.run(serve(args.serve))
    elif args.fsync_writer:
        os.makedirs(args.fsync_writer, exist_ok=True)
        fsync_writer(args.fsync_writer, FSYNC_WRITES)
    else:
        print(json.dumps(measure(args.round_trips, args.dir)))


if __name__ == "__main__":
    main()
