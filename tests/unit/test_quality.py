"""Data-quality results: the assertions facet extracted with each mention, folded per run, dataset, column and
assertion (lineage.transforms.model.quality_results)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import Row, SparkSession

from lineage.transforms import model
from tests.unit.model_events import at, dataset, events_df, run_event, run_id

ORDERS = ("s3://warehouse", "default.db/orders")
TEST_JOB = ("dbt", "test.orders")


def _checked(*assertions: dict[str, Any], where: str = "inputFacets") -> dict[str, Any]:
    ds = dataset(*ORDERS)
    if where == "inputFacets":
        ds["inputFacets"] = {"dataQualityAssertions": {"assertions": list(assertions)}}
    else:
        ds["facets"]["dataQualityAssertions"] = {"assertions": list(assertions)}
    return ds


def _results(spark: SparkSession, events: list[dict[str, Any]]) -> list[Row]:
    frame = events_df(spark, events)
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3)
    return sorted(
        model.quality_results(mentions, aliases).collect(),
        key=lambda r: (r.run_id, r.column_name or "", r.assertion),
    )


def test_each_assertion_is_a_result_of_its_run_dataset_and_column(spark: SparkSession) -> None:
    checked = _checked(
        {"assertion": "not_null", "success": True, "column": "id"},
        {"assertion": "row_count_between", "success": False},
    )
    rows = _results(spark, [run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[checked])])
    assert [(r.column_name, r.assertion, r.success, r.problem) for r in rows] == [
        (None, "row_count_between", False, None),
        ("id", "not_null", True, None),
    ]
    assert {(r.run_id, r.job_name) for r in rows} == {(run_id(1), "test.orders")}
    assert rows[0].checked_at.replace(tzinfo=None) == at(10).replace(tzinfo=None)


def test_the_latest_report_of_an_assertion_wins_whatever_the_order(spark: SparkSession) -> None:
    passed = run_event(
        "RUNNING",
        at(10),
        run_id(1),
        TEST_JOB,
        inputs=[_checked({"assertion": "unique", "success": True, "column": "id"})],
    )
    failed = run_event(
        "COMPLETE",
        at(20),
        run_id(1),
        TEST_JOB,
        inputs=[_checked({"assertion": "unique", "success": False, "column": "id"})],
    )
    for events in ([passed, failed], [failed, passed]):
        [row] = _results(spark, events)
        assert (row.assertion, row.success) == ("unique", False)


def test_a_failure_wins_over_a_success_of_the_same_assertion_in_one_event(spark: SparkSession) -> None:
    checked = _checked(
        {"assertion": "unique", "success": True, "column": "id"},
        {"assertion": "unique", "success": False, "column": "id"},
    )
    [row] = _results(spark, [run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[checked])])
    assert row.success is False


def test_the_facet_is_also_read_among_the_dataset_facets(spark: SparkSession) -> None:
    checked = _checked({"assertion": "not_null", "success": False, "column": "id"}, where="facets")
    [row] = _results(spark, [run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[checked])])
    assert (row.column_name, row.assertion, row.success) == ("id", "not_null", False)


@pytest.mark.parametrize(
    ("facet", "assertion", "success", "problem"),
    [
        (
            {"assertions": [{"success": False, "column": "id"}]},
            '{"column":"id","success":false}',
            False,
            "assertion without a name",
        ),
        (
            {"assertions": [{"assertion": "unique", "success": "maybe"}]},
            "unique",
            None,
            "success is not true or false",
        ),
        ({"assertions": {"unique": True}}, '{"assertions":{"unique":true}}', None, "no assertions array"),
    ],
)
def test_an_assertion_of_another_shape_is_kept_with_its_problem(
    spark: SparkSession, facet: dict[str, Any], assertion: str, success: bool | None, problem: str
) -> None:
    ds = dataset(*ORDERS)
    ds["inputFacets"] = {"dataQualityAssertions": facet}
    [row] = _results(spark, [run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[ds])])
    assert (row.assertion, row.success, row.problem) == (assertion, success, problem)


def test_mentions_without_the_facet_give_no_result(spark: SparkSession) -> None:
    events = [run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[dataset(*ORDERS)])]
    assert _results(spark, events) == []
