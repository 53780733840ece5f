"""The admin APIs: topics, partitions, configs, records deletion, leader election, reassignment, log dirs."""

from __future__ import annotations
