"""The only place where quorum.raft value objects meet protobuf (STYLE 8)."""

from __future__ import annotations

from quorum.raft.types import Entry, EntryKind, Message, MessageType, SnapshotMeta
from zkraft_proto import quorum_pb2 as pb

_ENTRY_KINDS = {k.value: k for k in EntryKind}
_MESSAGE_TYPES = {t.value: t for t in MessageType}


def snapshot_meta_to_pb(meta: SnapshotMeta) -> pb.SnapshotMeta:
    return pb.SnapshotMeta(
        index=meta.index,
        term=meta.term,
        voters=meta.voters,
        learners=meta.learners,
        observers=meta.observers,
        config_index=meta.config_index,
        config_context=meta.config_context,
    )


def snapshot_meta_from_pb(p: pb.SnapshotMeta) -> SnapshotMeta:
    return SnapshotMeta(
        p.index, p.term, tuple(p.voters), tuple(p.learners), tuple(p.observers), p.config_index, p.config_context
    )


def message_to_pb(m: Message) -> pb.RaftMessage:
    p = pb.RaftMessage(
        type=m.type.value,
        to=m.to,
        term=m.term,
        log_term=m.log_term,
        index=m.index,
        commit=m.commit,
        reject=m.reject,
        reject_hint=m.reject_hint,
        context=m.context,
        lazy_commits=m.lazy_commits,
        log_incomplete=m.log_incomplete,
    )
    setattr(p, "from", m.frm)  # `from` is a Python keyword
    if m.entries:
        p.entries.extend([pb.Entry(index=e.index, term=e.term, data=e.data, kind=e.kind.value) for e in m.entries])
    if m.snapshot is not None:
        p.snapshot.CopyFrom(snapshot_meta_to_pb(m.snapshot))
        p.has_snapshot = True
    return p


def message_from_pb(p: pb.RaftMessage) -> Message:
    mtype = _MESSAGE_TYPES.get(p.type)
    if mtype is None:
        raise ValueError(f"unknown raft message type {p.type}")
    entries: tuple[Entry, ...] = ()
    if p.entries:
        kinds = _ENTRY_KINDS
        entries = tuple(Entry(e.index, e.term, e.data, kinds[e.kind]) for e in p.entries)
    return Message(
        type=mtype,
        to=p.to,
        frm=getattr(p, "from"),
        term=p.term,
        log_term=p.log_term,
        index=p.index,
        entries=entries,
        commit=p.commit,
        reject=p.reject,
        reject_hint=p.reject_hint,
        snapshot=snapshot_meta_from_pb(p.snapshot) if p.has_snapshot else None,
        context=p.context,
        lazy_commits=p.lazy_commits,
        log_incomplete=p.log_incomplete,
    )
