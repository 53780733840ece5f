"""Small value types shared by the client, the broker and the tools (STYLE 8: NamedTuple keys)."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka's spelling: also a partition's log directory name.
        return f"{self.topic}-{self.partition}"
