"""The protobuf edge round-trips every message field; the register map applies, snapshots and restores."""

from __future__ import annotations

from pathlib import Path

import pytest

from quorum.codec import message_from_pb, message_to_pb
from quorum.raft.types import Entry, EntryKind, Message, MessageType, SnapshotMeta
from quorum.register_command import encode_set
from quorum.state_machine import RegisterMap
from zkraft_proto import quorum_pb2 as pb


@pytest.mark.parametrize(
    "message",
    [
        Message(
            MessageType.APPEND,
            2,
            1,
            7,
            log_term=6,
            index=41,
            entries=(Entry(42, 7, b"x"), Entry(43, 7, b"", EntryKind.NOOP)),
            commit=40,
        ),
        Message(MessageType.APPEND_RESP, 1, 3, 7, index=10, reject=True, reject_hint=8, log_term=5),
        Message(MessageType.SNAPSHOT, 3, 1, 9, snapshot=SnapshotMeta(100, 8, (1, 2, 3))),
        Message(MessageType.HEARTBEAT, 2, 1, 4, commit=3, context=b"1:77"),
        Message(MessageType.VOTE, 2, 1, 5, log_term=4, index=9, context=b"transfer"),
    ],
)
def test_message_round_trips_through_protobuf(message: Message) -> None:
    wire = message_to_pb(message).SerializeToString()
    assert message_from_pb(pb.RaftMessage.FromString(wire)) == message


def test_unknown_message_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown raft message type 99"):
        message_from_pb(pb.RaftMessage(type=99))


def test_register_map_applies_snapshots_and_restores(tmp_path: Path) -> None:
    sm = RegisterMap(tmp_path / "a")
    entries = [Entry(1, 1, b"", EntryKind.NOOP)] + [
        Entry(i, 1, encode_set(b"k%d" % i, b"v%d" % i)) for i in range(2, 6)
    ]
    assert sm.apply(entries) == [b""] * 5
    assert sm.applied_index() == 5
    assert sm.read(b"k3") == b"v3"
    snap = tmp_path / "snap"
    snap.write_bytes(b"".join(sm.snapshot_chunks()))
    sm.close()

    reopened = RegisterMap(tmp_path / "a")
    assert reopened.applied_index() == 5, "applied index survives a restart"
    reopened.close()

    other = RegisterMap(tmp_path / "b")
    other.apply([Entry(1, 1, encode_set(b"stale", b"gone"))])
    other.restore(snap, 5)
    assert other.applied_index() == 5
    assert other.read(b"stale") is None, "restore replaces the whole state"
    assert [other.read(b"k%d" % i) for i in range(2, 6)] == [b"v%d" % i for i in range(2, 6)]
    with pytest.raises(AssertionError, match="applied twice"):
        other.apply([Entry(5, 1, encode_set(b"k", b"v"))])
    other.close()
