"""The maintenance job's handling of a manifest rewrite that another writer's commit made stale."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lineage.batch.maintain import MANIFEST_ATTEMPTS, TableMaintenance, _Maintenance
from lineage.settings import load_settings


class _Answers:
    """Stands in for the SparkSession: each ``sql`` call takes the next answer (an exception is raised)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    def sql(self, text: str) -> _Answers:
        self.calls.append(text)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        self.rows = [(answer,)]
        return self

    def collect(self) -> list[tuple[Any]]:
        return self.rows


STALE = RuntimeError(
    "org.apache.iceberg.exceptions.ValidationException: Deleted manifest m4.avro could not be found"
)


def _job(spark: _Answers) -> _Maintenance:
    return _Maintenance(spark, load_settings(), datetime(2026, 11, 24, tzinfo=UTC))  # type: ignore[arg-type]


def test_a_stale_manifest_rewrite_is_planned_again() -> None:
    spark = _Answers(STALE, 7)
    report = TableMaintenance("lake.raw.events")

    _job(spark).rewrite_manifests(report, "lake.raw.events")

    assert (report.rewritten_manifests, report.manifests_skipped) == (7, None)
    assert len(spark.calls) == 2 and all("rewrite_manifests" in c for c in spark.calls)


def test_a_rewrite_that_keeps_losing_is_left_to_the_next_run_and_said_so() -> None:
    spark = _Answers(*[STALE] * MANIFEST_ATTEMPTS)
    report = TableMaintenance("lake.raw.events")

    _job(spark).rewrite_manifests(report, "lake.raw.events")

    assert report.rewritten_manifests == 0
    last = f"{MANIFEST_ATTEMPTS} of {MANIFEST_ATTEMPTS}"
    assert report.manifests_skipped == f"ValidationException on attempt {last}: another writer committed"


def test_any_other_failure_of_the_rewrite_fails_the_job() -> None:
    spark = _Answers(RuntimeError("java.io.IOException: disk full"))

    with pytest.raises(RuntimeError, match="disk full"):
        _job(spark).rewrite_manifests(TableMaintenance("lake.raw.events"), "lake.raw.events")
    assert len(spark.calls) == 1
