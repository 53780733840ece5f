"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and InitProducerId: the record path."""

from __future__ import annotations
