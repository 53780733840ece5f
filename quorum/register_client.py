"""An asyncio client of the bare quorum: proposals (batched), reads and status, following the leader.

Tests and benchmarks use it against `quorum.state.machine=register`.

Proposals made concurrently are coalesced into one `Propose` RPC per event
loop turn (up to `batch_max` commands), so many callers cost few messages.
`NOT_LEADER` answers name the leader; the client switches to it and retries
proposals that were certainly not applied. A server that does not answer at
all (its process is gone) is passed over for the next one at once; a pause
comes only when no server helped (the quorum's servers hold a proposal that
finds no leader until the election is decided, so the client need not poll).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from quorum.register_command import encode_set
from runtime import grpc_channels
from runtime.tls import TlsConfig
from zkraft_proto import quorum_pb2 as pb
from zkraft_proto import quorum_pb2_grpc as pb_grpc

GRPC_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


class QuorumClientError(Exception):
    """A request failed; `code` is the quorum's error code (NOT_LEADER, TIMEOUT, ...)."""

    def __init__(self, code: str, message: str, retriable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable


# Codes whose proposals were certainly not applied, so a retry cannot duplicate them.
_SAFE_TO_RETRY = {"NOT_LEADER", "PROPOSAL_DROPPED", "PROPOSAL_LOST", "SHUTTING_DOWN", "UNAVAILABLE"}
# The pause before a proposal is tried again where no server helped: none knew a leader, or every
# server the proposal went to since the last answer did not answer at all.
RETRY_PAUSE_S = 0.01
PROPOSE_ATTEMPTS_MAX = 10_000  # a bound besides the deadline: a few attempts per pause at most


@dataclass(frozen=True, slots=True)
class Proposal:
    index: int
    value: bytes


def _error_of(exc: grpc.aio.AioRpcError) -> tuple[str, int, str]:
    md = dict(exc.trailing_metadata() or ())
    code = str(md.get("error-code", exc.code().name))
    leader = int(md.get("leader-id", "0") or 0)
    return code, leader, str(md.get("leader-address", ""))


def _server_answered(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a quorum server sent this error (quorum.service.abort_with names its code), rather than
    gRPC, which found no server there (refused, reset: UNAVAILABLE)."""
    return any(key == "error-code" for key, _ in exc.trailing_metadata() or ())


class QuorumClient:
    def __init__(
        self,
        servers: Sequence[str],
        batch_max: int = 1024,
        request_timeout_s: float = 10.0,
        tls: TlsConfig | None = None,
    ) -> None:
        if not servers:
            raise ValueError("at least one server address is needed")
        self._servers = list(servers)
        self._tls = tls
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._leader: str = self._servers[0]
        self._batch_max = batch_max
        self._timeout_s = request_timeout_s
        self._pending: list[tuple[bytes, asyncio.Future[Proposal]]] = []
        self._flush_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    def _stub(self, address: str) -> pb_grpc.QuorumStub:
        ch = self._channels.get(address)
        if ch is None:
            ch = grpc_channels.aio_channel(address, self._tls, GRPC_OPTIONS)
            self._channels[address] = ch
        return pb_grpc.QuorumStub(ch)

    async def __aenter__(self) -> QuorumClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for ch in self._channels.values():
            await ch.close(grace=None)
        self._channels.clear()

    @property
    def leader(self) -> str:
        """The server proposals go to now: after a proposal returns, the one that answered it (the leader)."""
        return self._leader

    # ---- proposals
    async def propose(self, command: bytes) -> Proposal:
        fut: asyncio.Future[Proposal] = asyncio.get_running_loop().create_future()
        self._pending.append((command, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return await fut

    async def set(self, key: bytes, value: bytes) -> Proposal:
        return await self.propose(encode_set(key, value))

    def _flush(self) -> None:
        self._flush_scheduled = False
        while self._pending:
            batch, self._pending = self._pending[: self._batch_max], self._pending[self._batch_max :]
            task = asyncio.get_running_loop().create_task(self._send_batch(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, batch: list[tuple[bytes, asyncio.Future[Proposal]]]) -> None:
        try:
            results = await self._propose_with_retry([c for c, _ in batch])
        except Exception as exc:  # hand every caller the failure
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, fut), r in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(Proposal(r.index, r.value))

    async def _propose_with_retry(self, commands: list[bytes]) -> Sequence[pb.ProposeResult]:
        deadline = time.monotonic() + self._timeout_s
        silent: set[str] = set()  # servers that did not answer at all during this call (gone, or not up yet)
        for attempt in range(1, PROPOSE_ATTEMPTS_MAX + 1):
            address = self._leader
            remaining = deadline - time.monotonic()
            try:
                reply = await self._stub(address).Propose(pb.ProposeRequest(commands=commands), timeout=remaining)
                return reply.results
            except grpc.aio.AioRpcError as exc:
                code, _leader_id, leader_address = _error_of(exc)
                if code not in _SAFE_TO_RETRY or time.monotonic() >= deadline or attempt == PROPOSE_ATTEMPTS_MAX:
                    raise QuorumClientError(code, exc.details() or code, code in _SAFE_TO_RETRY) from None
                answered = _server_answered(exc)
                if answered:
                    silent.discard(address)
                else:
                    silent.add(address)
                self._leader = leader_address or self._next_server(address)
                # A pause only where no server helped: none knew a leader; or the leader named is one that
                # did not answer (a follower names a dead leader until its stream to it breaks); or no
                # server answered at all.
                if (answered and not leader_address) or leader_address in silent:
                    await asyncio.sleep(RETRY_PAUSE_S)
                elif len(silent) >= len(self._servers):
                    silent.clear()
                    await asyncio.sleep(RETRY_PAUSE_S)
        raise AssertionError("unreachable: the last attempt raises")

    def _next_server(self, address: str) -> str:
        k = self._servers.index(address) if address in self._servers else -1
        return self._servers[(k + 1) % len(self._servers)]

    # ---- reads and status
    async def read(self, key: bytes, linearizable: bool = False, server: str | None = None) -> bytes | None:
        address = server or self._leader
        try:
            reply = await self._stub(address).Read(
                pb.ReadRequest(key=key, linearizable=linearizable), timeout=self._timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            code, _, _ = _error_of(exc)
            raise QuorumClientError(code, exc.details() or code, code in _SAFE_TO_RETRY) from None
        return reply.value if reply.found else None

    async def status(self, address: str, timeout_s: float = 2.0) -> pb.StatusResponse:
        return await self._stub(address).Status(pb.StatusRequest(), timeout=timeout_s)

    async def transfer_leadership(self, address: str, target: int = 0, timeout_s: float = 5.0) -> int:
        reply = await self._stub(address).TransferLeadership(
            pb.TransferLeadershipRequest(target=target), timeout=timeout_s
        )
        return reply.leader
