"""Controller building blocks: state tables, leader election, LeaderAndIsr, fencing, rebalance.

Expectations come from Kafka 2.8: the `validPreviousStates` of
PartitionStateMachine.scala / ReplicaStateMachine.scala, PartitionLeaderElectionAlgorithmsTest,
Election.scala's ISR rules, LeaderAndIsr.scala and KafkaController.checkAndTriggerAutoLeaderRebalance.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
from pathlib import Path

import pytest

from broker.controller.election import (
    INITIAL_LEADER_EPOCH,
    INITIAL_ZK_VERSION,
    LEADER_DURING_DELETE,
    NO_LEADER,
    ElectionResult,
    LeaderAndIsr,
    aborted_election_message,
    apply_election,
    controlled_shutdown_election,
    controlled_shutdown_partition_leader,
    group_by_preferred_leader,
    imbalanced_brokers,
    is_newer_leader_epoch,
    is_stale_controller_epoch,
    leader_imbalance_ratios,
    new_partition_election,
    offline_election,
    offline_partition_leader,
    preferred_replica_election,
    preferred_replica_partition_leader,
    reassign_election,
    reassign_partition_leader,
    remove_replica_from_isr,
)
from broker.controller.states import (
    INITIAL_PARTITION_STATE,
    INITIAL_REPLICA_STATE,
    IllegalStateTransition,
    PartitionState,
    ReplicaState,
    check_transition,
    is_valid_transition,
    valid_previous_states,
)

P = PartitionState
R = ReplicaState

# --- state tables ---------------------------------------------------------------------------

# (current, target) pairs Kafka allows; every other pair of the same kind is illegal.
LEGAL_PARTITION = {
    (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION),
    (P.NEW_PARTITION, P.ONLINE_PARTITION),
    (P.ONLINE_PARTITION, P.ONLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.ONLINE_PARTITION),
    (P.NEW_PARTITION, P.OFFLINE_PARTITION),
    (P.ONLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION),
}
LEGAL_REPLICA = {
    (R.NON_EXISTENT_REPLICA, R.NEW_REPLICA),
    *((prev, R.ONLINE_REPLICA) for prev in (R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA)),
    (R.REPLICA_DELETION_INELIGIBLE, R.ONLINE_REPLICA),
    *((prev, R.OFFLINE_REPLICA) for prev in (R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA)),
    (R.REPLICA_DELETION_INELIGIBLE, R.OFFLINE_REPLICA),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT_REPLICA),
}
ALL_PAIRS = [
    *itertools.product(PartitionState, PartitionState),
    *itertools.product(ReplicaState, ReplicaState),
]


@pytest.mark.parametrize(("current", "target"), ALL_PAIRS, ids=lambda s: str(s))
def test_every_transition_is_legal_exactly_when_kafka_allows_it(
    current: PartitionState | ReplicaState, target: PartitionState | ReplicaState
) -> None:
    legal = (current, target) in LEGAL_PARTITION | LEGAL_REPLICA
    assert is_valid_transition(current, target) is legal
    if legal:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalStateTransition) as info:
            check_transition(current, target)
        assert (info.value.current, info.value.target) == (current, target)
        assert f"before moving to {target} state. Instead it is in {current} state" in str(info.value)


@pytest.mark.parametrize(
    ("state", "byte", "kafka_name"),
    [
        (P.NEW_PARTITION, 0, "NewPartition"),
        (P.ONLINE_PARTITION, 1, "OnlinePartition"),
        (P.OFFLINE_PARTITION, 2, "OfflinePartition"),
        (P.NON_EXISTENT_PARTITION, 3, "NonExistentPartition"),
        (R.NEW_REPLICA, 1, "NewReplica"),
        (R.ONLINE_REPLICA, 2, "OnlineReplica"),
        (R.OFFLINE_REPLICA, 3, "OfflineReplica"),
        (R.REPLICA_DELETION_STARTED, 4, "ReplicaDeletionStarted"),
        (R.REPLICA_DELETION_SUCCESSFUL, 5, "ReplicaDeletionSuccessful"),
        (R.REPLICA_DELETION_INELIGIBLE, 6, "ReplicaDeletionIneligible"),
        (R.NON_EXISTENT_REPLICA, 7, "NonExistentReplica"),
    ],
)
def test_states_carry_kafkas_state_byte_and_name(
    state: PartitionState | ReplicaState, byte: int, kafka_name: str
) -> None:
    assert state.state_byte == state.value == byte
    assert str(state) == kafka_name
    assert f"{state}" == kafka_name


def test_valid_previous_states_keep_kafkas_declaration_order() -> None:
    assert valid_previous_states(P.ONLINE_PARTITION) == (P.NEW_PARTITION, P.ONLINE_PARTITION, P.OFFLINE_PARTITION)
    assert valid_previous_states(R.REPLICA_DELETION_INELIGIBLE) == (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED)


def test_unknown_partitions_and_replicas_start_non_existent() -> None:
    assert INITIAL_PARTITION_STATE is P.NON_EXISTENT_PARTITION
    assert INITIAL_REPLICA_STATE is R.NON_EXISTENT_REPLICA


@pytest.mark.parametrize(
    ("current", "target", "subject", "message"),
    [
        (
            P.ONLINE_PARTITION,
            P.NON_EXISTENT_PARTITION,
            "t-0",
            "Partition t-0 should be in one of OfflinePartition states before moving to NonExistentPartition state. "
            "Instead it is in OnlinePartition state",
        ),
        (
            P.NON_EXISTENT_PARTITION,
            P.ONLINE_PARTITION,
            "",
            "Partition should be in one of NewPartition,OnlinePartition,OfflinePartition states before moving to "
            "OnlinePartition state. Instead it is in NonExistentPartition state",
        ),
        (
            R.ONLINE_REPLICA,
            R.REPLICA_DELETION_STARTED,
            "[Topic=t,Partition=0,Replica=1]",
            "Replica [Topic=t,Partition=0,Replica=1] should be in the OfflineReplica states before moving to "
            "ReplicaDeletionStarted state. Instead it is in OnlineReplica state",
        ),
    ],
)
def test_illegal_transition_message_uses_kafkas_wording(
    current: PartitionState | ReplicaState, target: PartitionState | ReplicaState, subject: str, message: str
) -> None:
    with pytest.raises(IllegalStateTransition) as info:
        check_transition(current, target, subject)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_partition_and_replica_states_never_mix() -> None:
    # The state bytes overlap (OnlinePartition and NewReplica are both 1); the states must not.
    assert len({P.ONLINE_PARTITION, R.NEW_REPLICA}) == 2
    assert not is_valid_transition(R.NEW_REPLICA, P.ONLINE_PARTITION)
    with pytest.raises(IllegalStateTransition):
        check_transition(P.OFFLINE_PARTITION, R.REPLICA_DELETION_STARTED)


# --- election algorithms: Kafka's PartitionLeaderElectionAlgorithmsTest, then ours ------------

OFFLINE_CASES = [
    # (name, assignment, isr, live, unclean_enabled, expected leader)
    ("kafka_offline", [2, 4], [2, 4], {4}, False, 4),
    ("kafka_last_isr_offline_unclean_disabled", [2, 4], [2], {4}, False, None),
    ("kafka_last_isr_offline_unclean_enabled", [2, 4], [2], {4}, True, 4),
    ("assignment_order_not_isr_order", [1, 2, 3], [3, 2, 1], {1, 2, 3}, False, 1),
    ("first_live_isr_member", [1, 2, 3], [1, 3], {2, 3}, False, 3),
    ("clean_wins_over_unclean", [1, 2, 3], [3], {1, 2, 3}, True, 3),
    ("unclean_takes_first_live_in_assignment", [1, 2, 3], [1], {3, 2}, True, 2),
    ("nobody_live", [1, 2], [1, 2], set(), True, None),
    ("isr_member_not_in_assignment_ignored", [1, 2], [5], {5}, False, None),
    ("empty_isr_unclean", [1, 2], [], {2}, True, 2),
]


@pytest.mark.parametrize(("name", "assignment", "isr", "live", "unclean", "leader"), OFFLINE_CASES)
def test_offline_partition_leader(
    name: str, assignment: list[int], isr: list[int], live: set[int], unclean: bool, leader: int | None
) -> None:
    assert offline_partition_leader(assignment, isr, live, unclean) == leader


@pytest.mark.parametrize(
    ("name", "reassignment", "isr", "live", "leader"),
    [
        ("kafka_reassign", [2, 4], [2, 4], {4}, 4),
        ("kafka_no_live_isr", [2, 4], [2], set(), None),
        ("kafka_empty_isr", [2, 4], [], {2}, None),
        ("target_order", [4, 2], [2, 4], {2, 4}, 4),
        ("live_isr_member_outside_target_ignored", [4, 5], [1, 4], {1}, None),
    ],
)
def test_reassign_partition_leader(
    name: str, reassignment: list[int], isr: list[int], live: set[int], leader: int | None
) -> None:
    assert reassign_partition_leader(reassignment, isr, live) == leader


@pytest.mark.parametrize(
    ("name", "assignment", "isr", "live", "leader"),
    [
        ("kafka_preferred", [2, 4], [2, 4], {2, 4}, 2),
        ("kafka_preferred_in_isr_not_live", [2, 4], [2], set(), None),
        ("kafka_preferred_not_in_isr_live", [2, 4], [4], {2, 4}, None),
        ("kafka_preferred_not_in_isr_not_live", [2, 4], [], set(), None),
        ("never_falls_back_to_second", [2, 4], [4], {4}, None),
        ("empty_assignment", [], [1], {1}, None),
    ],
)
def test_preferred_replica_partition_leader(
    name: str, assignment: list[int], isr: list[int], live: set[int], leader: int | None
) -> None:
    assert preferred_replica_partition_leader(assignment, isr, live) == leader


@pytest.mark.parametrize(
    ("name", "assignment", "isr", "live", "shutting_down", "leader"),
    [
        ("kafka_controlled_shutdown", [2, 4], [2, 4], {2, 4}, {2}, 4),
        ("kafka_last_isr_shutting_down", [2, 4], [2], {2, 4}, {2}, None),
        ("kafka_all_isr_simultaneously_shutdown", [2, 4], [2, 4], {2, 4}, {2, 4}, None),
        ("dead_isr_member_skipped", [1, 2, 3], [1, 2, 3], {1, 3}, {1}, 3),
        ("nobody_shutting_down_keeps_first", [1, 2], [1, 2], {1, 2}, set(), 1),
    ],
)
def test_controlled_shutdown_partition_leader(
    name: str, assignment: list[int], isr: list[int], live: set[int], shutting_down: set[int], leader: int | None
) -> None:
    assert controlled_shutdown_partition_leader(assignment, isr, live, shutting_down) == leader


# --- elections with their new ISR (Election.scala) --------------------------------------------


@pytest.mark.parametrize(
    ("name", "assignment", "isr", "live", "unclean_enabled", "expected"),
    [
        (
            "live_isr_members_kept_in_isr_order",
            [1, 2, 3],
            [3, 1, 2],
            {2, 3},
            False,
            ElectionResult(2, (3, 2), False, (2, 3)),
        ),
        ("kafka_offline", [2, 4], [2, 4], {4}, False, ElectionResult(4, (4,), False, (4,))),
        ("unclean_isr_is_leader_only", [2, 4], [2], {4}, True, ElectionResult(4, (4,), True, (4,))),
        ("unclean_with_several_live", [1, 2, 3], [1], {2, 3}, True, ElectionResult(2, (2,), True, (2, 3))),
        ("no_leader", [2, 4], [2], {4}, False, None),
    ],
)
def test_offline_election(
    name: str,
    assignment: list[int],
    isr: list[int],
    live: set[int],
    unclean_enabled: bool,
    expected: ElectionResult | None,
) -> None:
    assert offline_election(assignment, isr, live, unclean_enabled) == expected


@pytest.mark.parametrize(
    ("name", "fn_args", "expected"),
    [
        (
            "reassign_isr_unchanged_all_targets_told",
            ([4, 5, 6], [1, 5, 6], {5, 6}),
            ElectionResult(5, (1, 5, 6), False, (4, 5, 6)),
        ),
        ("reassign_none", ([4, 5], [1], {1, 4, 5}), None),
    ],
)
def test_reassign_election(
    name: str, fn_args: tuple[list[int], list[int], set[int]], expected: ElectionResult | None
) -> None:
    assert reassign_election(*fn_args) == expected


@pytest.mark.parametrize(
    ("name", "fn_args", "expected"),
    [
        (
            "preferred_isr_unchanged_whole_assignment_told",
            ([2, 4, 6], [4, 2], {2, 4}),
            ElectionResult(2, (4, 2), False, (2, 4, 6)),
        ),
        ("preferred_not_live", ([2, 4], [2, 4], {4}), None),
    ],
)
def test_preferred_replica_election(
    name: str, fn_args: tuple[list[int], list[int], set[int]], expected: ElectionResult | None
) -> None:
    assert preferred_replica_election(*fn_args) == expected


@pytest.mark.parametrize(
    ("name", "assignment", "isr", "live_or_shutting_down", "shutting_down", "expected"),
    [
        ("isr_minus_shutting_down", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, ElectionResult(2, (2, 3), False, (1, 2, 3))),
        ("two_shutting_down", [1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2}, ElectionResult(3, (3,), False, (1, 2, 3))),
        ("dead_not_told", [1, 2, 3], [1, 3], {1, 3}, {1}, ElectionResult(3, (3,), False, (1, 3))),
        ("last_isr_member_shutting_down", [1, 2], [1], {1, 2}, {1}, None),
    ],
)
def test_controlled_shutdown_election(
    name: str,
    assignment: list[int],
    isr: list[int],
    live_or_shutting_down: set[int],
    shutting_down: set[int],
    expected: ElectionResult | None,
) -> None:
    assert controlled_shutdown_election(assignment, isr, live_or_shutting_down, shutting_down) == expected


@pytest.mark.parametrize(
    ("name", "assignment", "live", "expected"),
    [
        ("all_live", [3, 1, 2], {1, 2, 3}, ElectionResult(3, (3, 1, 2), False, (3, 1, 2))),
        ("first_live_leads_live_form_isr", [3, 1, 2], {1, 2}, ElectionResult(1, (1, 2), False, (1, 2))),
        ("no_assigned_replica_alive", [3, 1], {2}, None),
    ],
)
def test_new_partition_election(
    name: str, assignment: list[int], live: set[int], expected: ElectionResult | None
) -> None:
    assert new_partition_election(assignment, live) == expected


# --- LeaderAndIsr ------------------------------------------------------------------------------

STATE = LeaderAndIsr(leader=1, leader_epoch=5, isr=(1, 2, 3), controller_epoch=7, zk_version=12)


def test_leader_and_isr_constants_are_kafkas() -> None:
    assert (NO_LEADER, LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, INITIAL_ZK_VERSION) == (-1, -2, 0, 0)


@pytest.mark.parametrize(
    ("name", "result", "expected"),
    [
        ("new_leader_and_isr", STATE.new_leader_and_isr(2, [2, 3]), LeaderAndIsr(2, 6, (2, 3), 7, 12)),
        ("isr_only_change_still_bumps_epoch", STATE.new_leader_and_isr(1, (1, 2)), LeaderAndIsr(1, 6, (1, 2), 7, 12)),
        ("new_leader_keeps_isr", STATE.new_leader(3), LeaderAndIsr(3, 6, (1, 2, 3), 7, 12)),
        ("new_epoch_and_zk_version", STATE.new_epoch_and_zk_version(), LeaderAndIsr(1, 6, (1, 2, 3), 7, 12)),
        ("stamped_by_new_controller", STATE.new_leader(2, controller_epoch=9), LeaderAndIsr(2, 6, (1, 2, 3), 9, 12)),
        ("with_zk_version", STATE.with_zk_version(13), LeaderAndIsr(1, 5, (1, 2, 3), 7, 13)),
        ("with_controller_epoch", STATE.with_controller_epoch(8), LeaderAndIsr(1, 5, (1, 2, 3), 8, 12)),
        ("initial", LeaderAndIsr.initial(2, [2, 1], 3), LeaderAndIsr(2, 0, (2, 1), 3, 0)),
        ("during_delete", LeaderAndIsr.during_delete([1, 2], 3), LeaderAndIsr(-2, 0, (1, 2), 3, 0)),
    ],
)
def test_leader_and_isr_helpers(name: str, result: LeaderAndIsr, expected: LeaderAndIsr) -> None:
    assert result == expected
    assert isinstance(result.isr, tuple)


@pytest.mark.parametrize(
    ("leader", "has_leader"), [(1, True), (0, True), (NO_LEADER, False), (LEADER_DURING_DELETE, True)]
)
def test_has_leader_only_false_for_no_leader(leader: int, has_leader: bool) -> None:
    assert dataclasses.replace(STATE, leader=leader).has_leader is has_leader


def test_leader_and_isr_is_frozen_and_slotted() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        STATE.leader = 2  # type: ignore[misc]
    assert not hasattr(STATE, "__dict__")


def test_apply_election_bumps_epoch_and_stamps_controller_epoch() -> None:
    result = offline_election([1, 2, 3], STATE.isr, {2, 3}, False)
    assert result is not None
    assert apply_election(STATE, result, controller_epoch=8) == LeaderAndIsr(2, 6, (2, 3), 8, 12)


@pytest.mark.parametrize(
    ("name", "state", "replica", "expected"),
    [
        ("leader_goes_offline", STATE, 1, LeaderAndIsr(NO_LEADER, 6, (2, 3), 8, 12)),
        ("follower_goes_offline", STATE, 3, LeaderAndIsr(1, 6, (1, 2), 8, 12)),
        ("last_isr_member_is_kept", LeaderAndIsr(2, 4, (2,), 7, 3), 2, LeaderAndIsr(NO_LEADER, 5, (2,), 8, 3)),
        ("not_in_isr_nothing_to_write", STATE, 4, None),
    ],
)
def test_remove_replica_from_isr(name: str, state: LeaderAndIsr, replica: int, expected: LeaderAndIsr | None) -> None:
    assert remove_replica_from_isr(state, replica, controller_epoch=8) == expected


# --- epoch fencing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_epoch", "known_epoch", "stale"), [(4, 5, True), (5, 5, False), (6, 5, False), (0, 0, False)]
)
def test_is_stale_controller_epoch(request_epoch: int, known_epoch: int, stale: bool) -> None:
    assert is_stale_controller_epoch(request_epoch, known_epoch) is stale


@pytest.mark.parametrize(
    ("request_epoch", "current_epoch", "newer"), [(6, 5, True), (5, 5, False), (4, 5, False), (0, -1, True)]
)
def test_is_newer_leader_epoch(request_epoch: int, current_epoch: int, newer: bool) -> None:
    assert is_newer_leader_epoch(request_epoch, current_epoch) is newer


def test_aborted_election_message_is_kafkas_one_line() -> None:
    message = aborted_election_message("t-0", controller_id=1, zk_controller_epoch=9)
    assert message == (
        "Aborted leader election for partition t-0 since the LeaderAndIsr path was already written by another "
        "controller. This probably means that the current controller 1 went through a soft failure and another "
        "controller was elected with epoch 9."
    )


# --- auto leader rebalance ---------------------------------------------------------------------

# Broker 1 prefers a-0..a-3 and leads only a-0; broker 2 prefers b-0, b-1 and leads both;
# broker 3 prefers c-0, which has no leader (-1), and c-1 whose leadership is unknown.
ASSIGNMENTS = {
    "a-0": [1, 2],
    "a-1": [1, 2],
    "a-2": [1, 3],
    "a-3": [1, 3],
    "b-0": [2, 1],
    "b-1": [2, 3],
    "c-0": [3, 1],
    "c-1": [3, 2],
}
LEADERS = {"a-0": 1, "a-1": 2, "a-2": 3, "a-3": 3, "b-0": 2, "b-1": 2, "c-0": NO_LEADER}


def test_group_by_preferred_leader() -> None:
    groups = group_by_preferred_leader(ASSIGNMENTS, LEADERS)
    assert {b: (g.partitions, g.off_preferred) for b, g in groups.items()} == {
        1: (("a-0", "a-1", "a-2", "a-3"), ("a-1", "a-2", "a-3")),
        2: (("b-0", "b-1"), ()),
        3: (("c-0", "c-1"), ("c-0",)),  # c-1 has no leadership info: not counted as off
    }


def test_leader_imbalance_ratios() -> None:
    assert leader_imbalance_ratios(ASSIGNMENTS, LEADERS) == {1: 0.75, 2: 0.0, 3: 0.5}


@pytest.mark.parametrize(
    ("threshold_percent", "expected"),
    [
        (10, {1: 0.75, 3: 0.5}),
        (50, {1: 0.75}),  # strictly greater: 0.5 is not above 50 %
        (75, {}),
        (0, {1: 0.75, 3: 0.5}),  # a balanced broker (ratio 0) is never imbalanced
    ],
)
def test_imbalanced_brokers(threshold_percent: int, expected: dict[int, float]) -> None:
    assert imbalanced_brokers(ASSIGNMENTS, LEADERS, threshold_percent) == expected


def test_imbalance_threshold_compares_as_kafkas_doubles() -> None:
    # 1 of 10 off preferred is exactly 0.1, not above leader.imbalance.per.broker.percentage=10.
    assignments = {f"t-{i}": [1, 2] for i in range(10)}
    leaders = {f"t-{i}": (2 if i == 0 else 1) for i in range(10)}
    assert imbalanced_brokers(assignments, leaders, 10) == {}
    leaders["t-1"] = 2
    assert imbalanced_brokers(assignments, leaders, 10) == {1: 0.2}


def test_empty_assignments_are_skipped() -> None:
    assert leader_imbalance_ratios({"x-0": []}, {"x-0": 1}) == {}


# --- purity (STYLE 5: pure decision functions) -------------------------------------------------

PURE_MODULES = ("broker/controller/states.py", "broker/controller/election.py")
ALLOWED_IMPORTS = {"__future__", "enum", "collections.abc", "dataclasses", "typing", "types"}


@pytest.mark.parametrize("relative_path", PURE_MODULES)
def test_building_blocks_import_nothing_that_does_io(relative_path: str) -> None:
    source = (Path(__file__).resolve().parent.parent / relative_path).read_text()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= ALLOWED_IMPORTS, f"{relative_path} imports {sorted(imported - ALLOWED_IMPORTS)}"
