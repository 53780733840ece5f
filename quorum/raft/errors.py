"""Errors the pure core raises to its caller (the node runner maps them on)."""

from __future__ import annotations


class RaftError(Exception):
    pass


class NotLeaderError(RaftError):
    """A proposal reached a node that is not the leader; `leader_id` is 0 when unknown."""

    def __init__(self, leader_id: int) -> None:
        super().__init__(f"not the leader (leader is {leader_id or 'unknown'})")
        self.leader_id = leader_id


class ProposalDroppedError(RaftError):
    """The leader refuses proposals for now (leadership transfer under way, or too much uncommitted)."""


class InvariantViolation(AssertionError):
    """An always-on check failed: the core's state is inconsistent (a bug)."""


def invariant(condition: bool, message: str) -> None:
    """Always-on assertion; `assert` is stripped under -O (STYLE 10)."""
    if not condition:
        raise InvariantViolation(message)
