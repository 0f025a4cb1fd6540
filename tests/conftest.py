"""Test session wiring: fixtures live in tests/fixtures/ modules, registered here."""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.spark",
    "tests.fixtures.kafka",
    "tests.fixtures.lake",
]
