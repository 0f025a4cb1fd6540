"""Test session wiring: fixtures live in tests/fixtures/ modules, registered here."""

from __future__ import annotations

import os

import pytest

# Our jobs report themselves through openlineage-python (lineage.observe). In tests that is off unless a
# test turns it on with its own transport: job subprocesses must not send to a developer's local broker.
os.environ.setdefault("LINEAGE__OPENLINEAGE__ENABLED", "false")

pytest_plugins = [
    "tests.fixtures.spark",
    "tests.fixtures.kafka",
    "tests.fixtures.lake",
    "tests.fixtures.pipeline",
    "tests.fixtures.intake",
    "tests.fixtures.cluster",
]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A selection that collects nothing fails: a renamed marker or folder must not pass CI silently."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
