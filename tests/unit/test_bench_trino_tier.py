"""Trino beside ``lineage sql`` (benchmarks/trino_tier.py): the pure parts, no Trino, no Spark."""

from __future__ import annotations

from benchmarks.queries import SQL_QUESTIONS
from benchmarks.trino_tier import canonical_rows, ordered_question, same_rows, tables_read


def test_the_tables_the_sql_questions_read() -> None:
    assert tables_read(SQL_QUESTIONS) == ["run_io", "runs"]
    assert tables_read([("q", "SELECT * FROM raw.events JOIN lineage.jobs j ON 1=1")]) == ["jobs"]
    assert tables_read([("q", "SELECT * FROM raw.events")], namespace="raw") == ["events"]


def test_order_matters_only_when_the_question_orders() -> None:
    aggregate, join = (sql for _, sql in SQL_QUESTIONS)
    assert not ordered_question(aggregate)
    assert ordered_question(join)
    assert ordered_question("select 1 order\n  by 1")
    a = [{"s": "FAIL", "n": 1}, {"s": "COMPLETE", "n": 2}]
    b = list(reversed(a))
    assert same_rows(a, b, aggregate)
    assert not same_rows(a, b, join)
    assert same_rows(a, a, join)


def test_numbers_compare_by_value_and_keys_by_name() -> None:
    assert canonical_rows([{"n": 2.0, "a": "x"}], ordered=True) == canonical_rows(
        [{"a": "x", "n": 2}], ordered=True
    )
    assert canonical_rows([{"n": 2.5}], ordered=True) != canonical_rows([{"n": 2}], ordered=True)
    assert not same_rows([{"n": 1}], [{"n": 1}, {"n": 1}], "select n from t")
    assert not same_rows([{"n": "1"}], [{"n": 1}], "select n from t")  # text is not a number
