"""Shared pytest configuration.

Markers (`sim`, `integration`, `spark`), `--strict-markers` and the default
per-test timeout live in pyproject.toml; shared helpers live in
`tests/helpers.py` (`from tests.helpers import wait_until`).
"""
