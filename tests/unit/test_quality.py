"""Data-quality results: the assertions facet extracted with each mention and the test run facet with each
input, folded per run, dataset, column and assertion (lineage.transforms.model.quality_results); the metrics
facet per run, dataset and column (lineage.transforms.model.quality_metrics)."""

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


# The test run facet (run.facets.test): each test counts for each input of its run.
CUSTOMERS = ("s3://warehouse", "default.db/customers")


def test_each_test_of_the_test_run_facet_is_a_result_on_each_input_of_its_run(spark: SparkSession) -> None:
    tests = {
        "tests": [
            {
                "name": "test.shop.assert_positive_amounts",
                "status": "fail",
                "severity": "error",
                "actual": "2",
            },
            {"name": "test.shop.orders_have_ids", "status": "pass", "params": {"column_name": "id"}},
            {"name": "test.shop.later", "status": "skip"},
        ]
    }
    event = run_event(
        "FAIL",
        at(10),
        run_id(1),
        ("dbt", "test.shop.assert_positive_amounts"),
        inputs=[dataset(*ORDERS), dataset(*CUSTOMERS)],
        outputs=[dataset("s3://warehouse", "audit.failures")],
        run_facets={"test": tests},
    )
    rows = _results(spark, [event])
    got = {(r.dataset_id, r.column_name, r.assertion, r.success, r.facet, r.status, r.problem) for r in rows}
    ids = {r.dataset_id for r in rows}
    assert len(ids) == 2  # the two inputs, not the output
    assert got == {
        (d, column, name, success, "test", status, None)
        for d in ids
        for column, name, success, status in (
            (None, "test.shop.assert_positive_amounts", False, "fail"),
            ("id", "test.shop.orders_have_ids", True, "pass"),
            (None, "test.shop.later", None, "skip"),
        )
    }


def test_assertions_and_tests_of_one_run_are_told_apart_by_facet(spark: SparkSession) -> None:
    checked = _checked({"assertion": "unique", "success": True, "column": "id"})
    event = run_event(
        "COMPLETE",
        at(10),
        run_id(1),
        TEST_JOB,
        inputs=[checked],
        run_facets={"test": {"tests": [{"name": "orders_fresh", "status": "fail"}]}},
    )
    rows = _results(spark, [event])
    assert [(r.assertion, r.success, r.facet, r.status) for r in rows] == [
        ("orders_fresh", False, "test", "fail"),
        ("unique", True, "dataQualityAssertions", None),
    ]


def test_a_test_of_another_shape_is_kept_with_its_problem(spark: SparkSession) -> None:
    tests = {
        "tests": [
            {"status": "fail", "type": "row_count"},
            {"name": "orders_fresh", "status": "error"},
            {"name": "orders_unique", "status": {"outcome": "pass"}},
            {"name": "orders_counted"},
        ]
    }
    unreadable = {"tests": {"orders_fresh": "pass"}}
    events = [
        run_event(
            "COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[dataset(*ORDERS)], run_facets={"test": tests}
        ),
        run_event(
            "COMPLETE",
            at(10),
            run_id(2),
            TEST_JOB,
            inputs=[dataset(*ORDERS)],
            run_facets={"test": unreadable},
        ),
    ]
    rows = _results(spark, events)
    assert [(r.run_id, r.assertion, r.success, r.status, r.problem) for r in rows] == [
        (run_id(1), "orders_counted", None, None, "status is not pass, fail or skip: none"),
        (run_id(1), "orders_fresh", None, None, 'status is not pass, fail or skip: "error"'),
        (run_id(1), "orders_unique", None, None, 'status is not pass, fail or skip: {"outcome":"pass"}'),
        (run_id(1), '{"status":"fail","type":"row_count"}', False, "fail", "test without a name"),
        (run_id(2), '{"tests":{"orders_fresh":"pass"}}', None, None, "no tests array"),
    ]


# The data-quality metrics facet: one row for the dataset and one per column.


def _metrics(spark: SparkSession, events: list[dict[str, Any]]) -> list[Row]:
    frame = events_df(spark, events)
    mentions = model.dataset_mentions(frame).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3)
    return sorted(
        model.quality_metrics(mentions, aliases).collect(), key=lambda r: (r.run_id, r.column_name or "")
    )


def _measured(facet: Any, where: str = "inputFacets") -> dict[str, Any]:
    ds = dataset(*ORDERS)
    if where == "inputFacets":
        ds["inputFacets"] = {"dataQualityMetrics": facet}
    else:
        ds["facets"]["dataQualityMetrics"] = facet
    return ds


def test_the_metrics_facet_gives_a_row_for_the_dataset_and_one_per_column(spark: SparkSession) -> None:
    facet = {
        "rowCount": 3,
        "bytes": 4096,
        "fileCount": 1,
        "columnMetrics": {
            "id": {"nullCount": 0, "distinctCount": 3, "min": 1, "max": 3},
            "price": {"nullCount": 1, "sum": 30.5, "count": 2, "quantiles": {"0.5": 12.0, "1": 18.5}},
        },
    }
    rows = _metrics(spark, [run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[_measured(facet)])])
    fields = (
        "column_name",
        "row_count",
        "bytes",
        "file_count",
        "null_count",
        "distinct_count",
        "sum",
        "count",
    )
    assert [tuple(r[f] for f in fields) for r in rows] == [
        (None, 3, 4096, 1, None, None, None, None),
        ("id", None, None, None, 0, 3, None, None),
        ("price", None, None, None, 1, None, 30.5, 2.0),
    ]
    assert (rows[1].min, rows[1].max) == (1.0, 3.0)
    assert [(q.quantile, q.value) for q in rows[2].quantiles] == [("0.5", 12.0), ("1", 18.5)]
    assert {(r.run_id, r.job_name, r.problem) for r in rows} == {(run_id(1), "test.orders", None)}
    assert rows[0].measured_at.replace(tzinfo=None) == at(10).replace(tzinfo=None)


def test_the_latest_metrics_of_a_run_win_whatever_the_order(spark: SparkSession) -> None:
    first = run_event(
        "RUNNING", at(10), run_id(1), TEST_JOB, inputs=[_measured({"rowCount": 2, "columnMetrics": {}})]
    )
    last = run_event(
        "COMPLETE",
        at(20),
        run_id(1),
        TEST_JOB,
        inputs=[_measured({"rowCount": 5, "columnMetrics": {}}, where="facets")],
    )
    for events in ([first, last], [last, first]):
        [row] = _metrics(spark, events)
        assert (row.column_name, row.row_count) == (None, 5)


def test_metrics_of_another_shape_are_kept_with_their_problem(spark: SparkSession) -> None:
    odd = {
        "rowCount": "many",
        "columnMetrics": {"id": "lots", "price": {"nullCount": "none", "sum": 3.5, "quantiles": [1, 2]}},
    }
    events = [
        run_event("COMPLETE", at(10), run_id(1), TEST_JOB, inputs=[_measured(odd)]),
        run_event("COMPLETE", at(10), run_id(2), TEST_JOB, inputs=[_measured({"columnMetrics": ["id"]})]),
    ]
    rows = _metrics(spark, events)
    assert [(r.run_id, r.column_name, r.row_count, r.null_count, r.sum, r.problem) for r in rows] == [
        (run_id(1), None, None, None, None, 'rowCount is not a number: "many"'),
        (run_id(1), "id", None, None, None, 'not an object: "lots"'),
        (
            run_id(1),
            "price",
            None,
            None,
            3.5,
            'nullCount is not a number: "none"; quantiles is not a number: [1,2]',
        ),
        (run_id(2), None, None, None, None, 'columnMetrics is not an object: ["id"]'),
    ]
