"""Replica assignment against Kafka's own AdminTest / AdminRackAwareTest expectations (K28 core tests)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from client.kafka.assignment import (
    AdminOperationError,
    BrokerMetadata,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
    check_partition_increase,
    parse_replica_assignment,
    rack_alternated_broker_list,
    validate_replica_assignment,
    validate_topic_assignment,
)
from client.kafka.errors import (
    BrokerNotAvailableError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


def _unaware(n: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in range(n)]


def _racked(racks: dict[int, str]) -> list[BrokerMetadata]:
    # RackAwareTest.toBrokerMetadata: sorted by broker id
    return [BrokerMetadata(b, r) for b, r in sorted(racks.items())]


# --- rack-unaware (AdminTest.testReplicaAssignment) -----------------------------------------


def test_kafka_admin_test_5_brokers_10_partitions_rf3_fixed_start_0() -> None:
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas_to_brokers(_unaware(5), 10, 3, fixed_start_index=0) == expected


def test_broker_ids_are_taken_in_given_order_not_renumbered() -> None:
    brokers = [BrokerMetadata(b) for b in (10, 20, 30)]
    assert assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=0) == {0: [10, 20], 1: [20, 30], 2: [30, 10]}


def test_start_partition_id_continues_leaders_but_not_the_shift() -> None:
    # As in Kafka, the shift only grows at multiples of n met inside this call: the leaders
    # continue the walk of a whole-topic assignment, the followers do not.
    whole = assign_replicas_to_brokers(_unaware(5), 10, 3, fixed_start_index=0)
    tail = assign_replicas_to_brokers(_unaware(5), 4, 3, fixed_start_index=0, start_partition_id=6)
    assert [tail[p][0] for p in range(6, 10)] == [whole[p][0] for p in range(6, 10)]
    assert tail == {6: [1, 2, 3], 7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}


@pytest.mark.parametrize("seed", range(20))
def test_random_start_spreads_leaders_and_never_repeats_a_broker(seed: int) -> None:
    assignment = assign_replicas_to_brokers(_unaware(4), 8, 3, rng=random.Random(seed))
    assert sorted(assignment) == list(range(8))
    assert all(len(set(r)) == 3 for r in assignment.values())
    assert set(Counter(r[0] for r in assignment.values()).values()) == {2}
    assert set(Counter(b for r in assignment.values() for b in r).values()) == {6}


def test_same_seed_same_assignment() -> None:
    a = assign_replicas_to_brokers(_unaware(6), 12, 3, rng=random.Random(7))
    b = assign_replicas_to_brokers(_unaware(6), 12, 3, rng=random.Random(7))
    assert a == b


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "error", "message"),
    [
        (3, 10, 0, InvalidReplicationFactorError, "Replication factor must be larger than 0."),
        (3, 10, 4, InvalidReplicationFactorError, "Replication factor: 4 larger than available brokers: 3."),
        (5, 10, 6, InvalidReplicationFactorError, "Replication factor: 6 larger than available brokers: 5."),
        (3, 0, 1, InvalidPartitionsError, "Number of partitions must be larger than 0."),
    ],
)
def test_invalid_arguments_have_kafkas_messages(
    brokers: int, partitions: int, rf: int, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        assign_replicas_to_brokers(_unaware(brokers), partitions, rf)
    assert str(info.value) == message


def test_invalid_replication_factor_has_code_38() -> None:
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas_to_brokers(_unaware(3), 1, 4)
    assert info.value.code == 38


# --- rack-aware (AdminRackAwareTest) --------------------------------------------------------


def test_rack_alternated_broker_list_as_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 4, 2]
    doc = {0: "rack1", 1: "rack1", 2: "rack1", 3: "rack2", 4: "rack2", 5: "rack2", 6: "rack3", 7: "rack3", 8: "rack3"}
    assert rack_alternated_broker_list(doc) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_kafka_rack_aware_7_partitions_expected_assignment() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    expected = {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    assert assign_replicas_to_brokers(_racked(racks), 7, 3, fixed_start_index=0, start_partition_id=0) == expected


def _check_distribution(
    assignment: dict[int, list[int]],
    racks: dict[int, str],
    n_partitions: int,
    rf: int,
    *,
    verify_rack_aware: bool = True,
    verify_leaders: bool = True,
    verify_replicas: bool = True,
) -> None:
    """RackAwareTest.checkReplicaDistribution, with racks spanned = min(racks, RF)."""
    n_brokers = len(racks)
    n_racks = len(set(racks.values()))
    assert len(assignment) == n_partitions
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        if verify_rack_aware:
            assert len({racks[b] for b in replicas}) == min(n_racks, rf)
    if verify_leaders:
        leaders = Counter(r[0] for r in assignment.values())
        assert [leaders[b] for b in racks] == [n_partitions // n_brokers] * n_brokers
    if verify_replicas:
        counts = Counter(b for r in assignment.values() for b in r)
        assert [counts[b] for b in racks] == [n_partitions * rf // n_brokers] * n_brokers


EVEN = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def test_rack_aware_fixed_start_2() -> None:
    assignment = assign_replicas_to_brokers(_racked(EVEN), 6, 3, fixed_start_index=2, start_partition_id=0)
    _check_distribution(assignment, EVEN, 6, 3)


@pytest.mark.parametrize("seed", range(30))
def test_rack_aware_random_start(seed: int) -> None:
    rng = random.Random(seed)
    _check_distribution(assign_replicas_to_brokers(_racked(EVEN), 6, 3, rng=rng), EVEN, 6, 3)
    _check_distribution(assign_replicas_to_brokers(_racked(EVEN), 12, 2, rng=rng), EVEN, 12, 2)
    _check_distribution(assign_replicas_to_brokers(_racked(EVEN), 6, 2, rng=rng), EVEN, 6, 2)
    three = {0: "rack1", 1: "rack2", 4: "rack3"}
    _check_distribution(assign_replicas_to_brokers(_racked(three), 3, 2, rng=rng), three, 3, 2)


def test_rack_aware_uneven_replicas() -> None:
    assignment = assign_replicas_to_brokers(_racked(EVEN), 13, 3, fixed_start_index=0, start_partition_id=0)
    _check_distribution(assignment, EVEN, 13, 3, verify_leaders=False, verify_replicas=False)


@pytest.mark.parametrize("seed", range(10))
def test_rack_aware_uneven_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas_to_brokers(_racked(racks), 12, 3, rng=random.Random(seed))
    _check_distribution(assignment, racks, 12, 3, verify_replicas=False)


@pytest.mark.parametrize("seed", range(10))
def test_rack_aware_expansion(seed: int) -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas_to_brokers(_racked(racks), 12, 2, start_partition_id=12, rng=random.Random(seed))
    assert sorted(assignment) == list(range(12, 24))
    _check_distribution(assignment, racks, 12, 2)


@pytest.mark.parametrize("seed", range(10))
def test_rack_aware_large_number_of_partitions(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    racks |= {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}
    assignment = assign_replicas_to_brokers(_racked(racks), 96, 3, rng=random.Random(seed))
    _check_distribution(assignment, racks, 96, 3)


@pytest.mark.parametrize("seed", range(10))
def test_more_and_fewer_replicas_than_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    rng = random.Random(seed)
    more = assign_replicas_to_brokers(_racked(racks), 6, 5, rng=rng)
    assert all(len({racks[b] for b in r}) == 3 and len(set(r)) == 5 for r in more.values())
    fewer = assign_replicas_to_brokers(_racked(racks), 6, 2, rng=rng)
    assert all(len({racks[b] for b in r}) == 2 for r in fewer.values())


def test_single_rack_spreads_leaders_evenly() -> None:
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas_to_brokers(_racked(racks), 6, 3, rng=random.Random(1))
    assert all(len(set(r)) == 3 for r in assignment.values())
    assert set(Counter(r[0] for r in assignment.values()).values()) == {1}


def test_skip_broker_with_replica_already_assigned() -> None:
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas_to_brokers(_racked(racks), 6, 4, fixed_start_index=2)
    _check_distribution(assignment, racks, 6, 4, verify_rack_aware=False, verify_leaders=False, verify_replicas=False)


def test_partial_rack_information_is_refused() -> None:
    brokers = [BrokerMetadata(0, "r1"), BrokerMetadata(1, None)]
    with pytest.raises(AdminOperationError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers(brokers, 1, 1)


def test_broker_metadatas_rack_aware_modes() -> None:
    racks = {2: "r1", 0: None, 1: "r2"}
    with pytest.raises(AdminOperationError, match="--disable-rack-aware"):
        broker_metadatas(racks)
    assert broker_metadatas(racks, RackAwareMode.DISABLED) == [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    assert broker_metadatas(racks, RackAwareMode.SAFE) == [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    full = {1: "r2", 0: "r1"}
    assert broker_metadatas(full) == [BrokerMetadata(0, "r1"), BrokerMetadata(1, "r2")]
    assert broker_metadatas(full, RackAwareMode.SAFE) == [BrokerMetadata(0, "r1"), BrokerMetadata(1, "r2")]


# --- adding partitions ------------------------------------------------------------------------


def test_new_partitions_follow_partition_zero() -> None:
    existing = {0: [2, 3], 1: [3, 4], 2: [4, 0]}
    added = assign_new_partitions(_unaware(5), existing, 2)
    assert sorted(added) == [3, 4]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    # start index = position of broker 2 (partition 0's leader); partition 3 -> (3 + 2) % 5 = 0
    assert added[3][0] == 0 and added[4][0] == 1


def test_partition_count_can_only_grow() -> None:
    assert check_partition_increase("t", 3, 5) == 2
    with pytest.raises(InvalidPartitionsError) as info:
        check_partition_increase("t", 3, 3)
    assert str(info.value) == (
        "The number of partitions for a topic can only be increased. Topic t currently has 3 partitions, "
        "3 would not be an increase."
    )


# --- --replica-assignment ---------------------------------------------------------------------


def test_parse_replica_assignment() -> None:
    assert parse_replica_assignment("1:2,2:3") == {0: [1, 2], 1: [2, 3]}
    assert parse_replica_assignment(" 0 : 1 ,1:2,") == {0: [0, 1], 1: [1, 2]}
    assert parse_replica_assignment("5") == {0: [5]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1:2:1,2:3:4", "Partition replica lists may not contain duplicate entries: 1"),
        ("1:2,2:3:4", "Partition 1 has different replication factor: [2, 3, 4]"),
        ("1:x", 'For input string: "x"'),
        ("1::2", 'For input string: ""'),
        ("", 'For input string: ""'),
    ],
)
def test_parse_replica_assignment_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        parse_replica_assignment(text)
    assert str(info.value) == message


def test_validate_topic_assignment() -> None:
    validate_topic_assignment({0: [1, 2], 1: [2, 3]})
    with pytest.raises(InvalidReplicaAssignmentError, match="same number of replicas"):
        validate_topic_assignment({0: [1, 2], 1: [2]})
    with pytest.raises(InvalidReplicaAssignmentError, match="Duplicate replica assignment found"):
        validate_topic_assignment({0: [1, 1]})
    with pytest.raises(InvalidReplicaAssignmentError, match="consecutive 0-based"):
        validate_topic_assignment({0: [1], 2: [2]})


def test_validate_replica_assignment_for_new_partitions() -> None:
    validate_replica_assignment({3: [1, 2]}, 2, {1, 2, 3})
    with pytest.raises(InvalidReplicaAssignmentError, match="Cannot have replication factor of 0 for partition id 3."):
        validate_replica_assignment({3: []}, 2, {1, 2})
    with pytest.raises(InvalidReplicaAssignmentError, match="Duplicate brokers not allowed"):
        validate_replica_assignment({3: [1, 1]}, 2, {1, 2})
    with pytest.raises(BrokerNotAvailableError) as info:
        validate_replica_assignment({3: [1, 9]}, 2, {1, 2})
    assert str(info.value) == (
        "Some brokers specified for partition id 3 are not available. Specified brokers: 1, 9, available brokers: 1, 2."
    )
    with pytest.raises(InvalidReplicaAssignmentError, match="partition 0 has 2 while partition 3 has 1 replicas"):
        validate_replica_assignment({3: [1]}, 2, {1, 2})
