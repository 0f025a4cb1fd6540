"""The Python comparison the full = incremental build tests use (tests/table_rows.py)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from tests.table_rows import TableRows, assert_same_rows, collect_rows

SCHEMA = "id bigint, tags map<string, string>, point struct<x: double, y: double>, names array<string>"


def test_rows_in_another_order_and_map_entries_in_another_order_are_the_same(spark: SparkSession) -> None:
    first = spark.createDataFrame(
        [(1, {"a": "1", "b": "2"}, (1.0, float("nan")), ["x", "y"]), (2, None, None, [])], SCHEMA
    )
    second = spark.createDataFrame(
        [(2, None, None, []), (1, {"b": "2", "a": "1"}, (1.0, float("nan")), ["x", "y"])], SCHEMA
    ).select("names", "point", "tags", "id")  # columns in another order too
    assert_same_rows("t", collect_rows(second), collect_rows(first))


def test_a_changed_value_a_missing_row_or_a_retyped_column_fails_naming_the_rows(spark: SparkSession) -> None:
    expected = collect_rows(spark.createDataFrame([(1, None, None, ["x", "y"]), (2, None, None, [])], SCHEMA))
    reordered_list = collect_rows(
        spark.createDataFrame([(1, None, None, ["y", "x"]), (2, None, None, [])], SCHEMA)
    )
    with pytest.raises(
        AssertionError, match=r"only in the actual \(1\).*'y', 'x'.*only in the expected \(1\)"
    ):
        assert_same_rows("t", reordered_list, expected)
    one_row = collect_rows(spark.createDataFrame([(1, None, None, ["x", "y"])], SCHEMA))
    with pytest.raises(AssertionError, match=r"^t: 1 rows against 2 expected"):
        assert_same_rows("t", one_row, expected)
    duplicated = TableRows(expected.types, sorted([*expected.rows, expected.rows[0]], key=repr))
    with pytest.raises(AssertionError, match=r"only in the actual \(1\)"):
        assert_same_rows("t", duplicated, expected)
    retyped = collect_rows(spark.createDataFrame([(1,), (2,)], "id int"))
    with pytest.raises(AssertionError, match="columns"):
        assert_same_rows("t", retyped, collect_rows(spark.createDataFrame([(1,), (2,)], "id bigint")))


def test_nullability_is_not_compared(spark: SparkSession) -> None:
    nullable = spark.createDataFrame([(1,)], "id bigint")
    required = spark.createDataFrame([(1,)], "id bigint not null")
    assert_same_rows("t", collect_rows(required), collect_rows(nullable))
