"""Errors a quorum node reports to its callers (proposals, reads), one class per wire code.

The gRPC edge maps them to status codes with `to_grpc_status`; the client maps
them back from the status code and the `error-code` trailing metadata.
"""

from __future__ import annotations


class QuorumError(Exception):
    code = "QUORUM_ERROR"
    retriable = False


class NotLeaderError(QuorumError):
    """This node cannot accept writes; `leader_id`/`leader_address` say where to go (0/"" when unknown)."""

    code = "NOT_LEADER"
    retriable = True

    def __init__(self, leader_id: int, leader_address: str) -> None:
        where = f"node {leader_id} at {leader_address}" if leader_id else "unknown (election in progress)"
        super().__init__(f"not the leader; the leader is {where}")
        self.leader_id = leader_id
        self.leader_address = leader_address


class ProposalDroppedError(QuorumError):
    """The leader refused the proposal for now (leadership transfer, too much uncommitted data)."""

    code = "PROPOSAL_DROPPED"
    retriable = True


class ProposalLostError(QuorumError):
    """The proposal's log position was taken by another leader's entry: it was NOT applied."""

    code = "PROPOSAL_LOST"
    retriable = True


class QuorumTimeoutError(QuorumError):
    """No answer in time: a write may or may not have been applied."""

    code = "TIMEOUT"
    retriable = True


class MembershipChangeError(QuorumError):
    """The leader refused a membership change (one in progress, a learner not caught up, an unknown id,
    a removal that would lose the quorum); the message says which, in one line."""

    code = "MEMBERSHIP_CHANGE_REFUSED"


class ShuttingDownError(QuorumError):
    code = "SHUTTING_DOWN"
    retriable = True


class ClusterMismatchError(QuorumError):
    """A node's stored or announced cluster id / peer list differs from its configuration."""

    code = "CLUSTER_MISMATCH"


class StartupError(QuorumError):
    """The node cannot start as configured (port taken, peers disagree about the cluster, ...)."""

    code = "STARTUP"


class StateUnavailableError(QuorumError):
    """A peer asked for this node's state (FetchState) and it has none recent enough to give."""

    code = "STATE_UNAVAILABLE"
    retriable = True
