"""broker/kafka_api/entities.build fits one plain description of a response to every version's kio classes."""

from __future__ import annotations

import io

import kio.schema.produce.v3.response as produce_v3
import kio.schema.produce.v9.response as produce_v9
import pytest
from kio.serial import entity_reader, entity_writer

from broker.kafka_api.entities import build, millis

PARTITION = {"index": 2, "error_code": 6, "base_offset": -1, "log_append_time": -1, "log_start_offset": 7}


@pytest.mark.parametrize("module", [produce_v3, produce_v9])
def test_one_description_round_trips_through_each_version(module) -> None:  # type: ignore[no-untyped-def]
    response = build(
        module.ProduceResponse,
        responses=[{"name": "t", "partition_responses": [PARTITION | {"record_errors": []}]}],
        throttle_time=5,
    )
    buffer = io.BytesIO()
    entity_writer(module.ProduceResponse)(buffer, response)
    decoded, _size = entity_reader(module.ProduceResponse)(buffer.getvalue(), 0)
    [partition] = decoded.responses[0].partition_responses
    assert (partition.index, int(partition.error_code), partition.base_offset) == (2, 6, -1)
    assert partition.log_append_time is None and millis(partition.log_append_time) == -1
    assert millis(decoded.throttle_time) == 5


def test_a_missing_required_field_names_entity_and_field() -> None:
    with pytest.raises(TypeError, match=r"TopicProduceResponse v9: field 'partition_responses' is required"):
        build(produce_v9.ProduceResponse, responses=[{"name": "t"}])


def test_fields_the_version_lacks_are_dropped() -> None:
    # v3 has no log_start_offset (v5+) nor record_errors (v8+): the same description still builds.
    response = build(produce_v3.ProduceResponse, responses=[{"name": "t", "partition_responses": [PARTITION]}])
    assert response.responses[0].partition_responses[0].base_offset == -1
