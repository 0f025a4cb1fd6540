"""`lineage sql` (DuckDB), Spark SQL and pyiceberg give the same answers on the lake the real pipeline built.

The questions are asked through the console script, as a user does, and through the test session's Spark on
the same catalog; the SQL text is the same where both dialects allow (the catalog is ``lab`` in both).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from lineage.cli.sql import plain
from lineage.io.catalog import open_catalog
from tests.fixtures.pipeline import Pipeline

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).with_name("lineage"))


def lineage_sql(
    env: dict[str, str], *args: str, stdin: str | None = None, expect: int = 0
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [LINEAGE, "sql", *args], env=env, input=stdin, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == expect, (
        f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    return done


def duck(env: dict[str, str], query: str, *args: str) -> list[dict[str, Any]]:
    return json.loads(lineage_sql(env, "--format", "json", query, *args).stdout)


def spark_value(value: Any) -> Any:
    """A Spark value as `lineage sql --format json` writes it (PySpark gives naive local datetimes)."""
    if isinstance(value, datetime) and value.tzinfo is None:
        value = value.astimezone(UTC)
    if isinstance(value, dict):
        return {k: spark_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spark_value(v) for v in value]
    return plain(value, for_json=True)


def spark_rows(spark: SparkSession, query: str) -> list[dict[str, Any]]:
    return [spark_value(row.asDict(recursive=True)) for row in spark.sql(query).collect()]


def unordered(rows: list[dict[str, Any]]) -> list[str]:
    """Rows in a fixed order whatever the engine's (NULLs sort first in Spark, last in DuckDB)."""
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def tables(spark: SparkSession) -> list[str]:
    found = []
    for namespace in ("raw", "lineage"):
        found += [
            f"{namespace}.{r.tableName}" for r in spark.sql(f"SHOW TABLES IN lab.{namespace}").collect()
        ]
    return sorted(found)


def counts_sql(names: list[str]) -> str:
    return " UNION ALL ".join(f"SELECT '{n}' AS table_name, count(*) AS n FROM lab.{n}" for n in names)


def test_counts_of_every_table(lab_pipeline: Pipeline, spark: SparkSession) -> None:
    names = tables(spark)
    assert {"raw.events", "raw.rejected", "lineage.runs", "lineage.run_io", "lineage.column_edges"} <= set(
        names
    )
    env = lab_pipeline.env
    views = duck(env, "SELECT table_schema || '.' || table_name AS t FROM information_schema.tables")
    assert sorted(v["t"] for v in views) == names  # every table of the lake is a view, nothing else
    query = counts_sql(names)
    out = lineage_sql(env, "--format", "json", stdin=query).stdout  # the SQL read from stdin
    assert unordered(json.loads(out)) == unordered(spark_rows(spark, query))
    counted = {r["table_name"]: r["n"] for r in json.loads(out)}
    assert counted["lineage.runs"] > 0
    catalog = open_catalog(lab_pipeline.settings.catalog)  # the third reader: pyiceberg, as the CLI reads
    assert counted == {n: catalog.load_table(n).scan().count() for n in names}


JOIN = """
SELECT r.job_namespace, r.job_name, r.inferred_state, io.direction,
       count(*) AS pairs, count(DISTINCT io.dataset_id) AS datasets, max(io.last_seen) AS last_seen,
       sum(io.row_count) AS rows_reported
FROM lab.lineage.runs r JOIN lab.lineage.run_io io ON io.run_id = r.run_id
GROUP BY r.job_namespace, r.job_name, r.inferred_state, io.direction
"""


def test_a_join_of_runs_with_their_datasets(
    lab_pipeline: Pipeline, spark: SparkSession, tmp_path: Path
) -> None:
    query = tmp_path / "join.sql"
    query.write_text(JOIN)
    answer = duck(lab_pipeline.env, "-f", str(query))  # the SQL read from a file
    assert unordered(answer) == unordered(spark_rows(spark, JOIN))
    jobs = {(r["job_name"], r["direction"]) for r in answer}
    assert ("supplier_stats_app.overwrite_by_expression_default_supplier_stats", "input") in jobs


# The upstream columns of supplier_stats.total_price, one hop, with the datasets' names.
COLUMN_UPSTREAM = """
SELECT s.namespace AS source_namespace, s.name AS source_name, e.source_field,
       e.job_namespace, e.job_name, e.is_direct, e.subtypes, e.transformations
FROM lab.lineage.column_edges e
JOIN lab.lineage.datasets s ON s.dataset_id = e.source_dataset_id
JOIN lab.lineage.datasets t ON t.dataset_id = e.target_dataset_id
WHERE t.namespace = 's3://warehouse' AND t.name = 'default.db/supplier_stats'
  AND e.target_field = 'total_price'
"""


def test_a_column_lineage_question(lab_pipeline: Pipeline, spark: SparkSession) -> None:
    answer = duck(lab_pipeline.env, COLUMN_UPSTREAM)
    assert unordered(answer) == unordered(spark_rows(spark, COLUMN_UPSTREAM))
    assert ("default.db/orders", "price") in {(r["source_name"], r["source_field"]) for r in answer}


def test_time_travel_reads_the_snapshot_current_then(lab_pipeline: Pipeline, spark: SparkSession) -> None:
    catalog = open_catalog(lab_pipeline.settings.catalog)
    names = ["raw.events", "lineage.runs", "lineage.run_io", "lineage.column_edges"]
    # When the first build had committed all of these: before the second ingestion and build (and before
    # any later test's build). Spark refuses a time before a table's first snapshot; DuckDB reads it empty.
    first_build_ms = max(catalog.load_table(n).metadata.snapshot_log[0].timestamp_ms for n in names[1:])
    at = datetime.fromtimestamp(first_build_ms / 1000, UTC)
    env = lab_pipeline.env
    now = {r["table_name"]: r["n"] for r in duck(env, counts_sql(names))}
    then = {r["table_name"]: r["n"] for r in duck(env, counts_sql(names), "--as-of", at.isoformat())}
    in_spark = {
        n: spark.sql(f"SELECT * FROM lab.{n} TIMESTAMP AS OF timestamp_millis({first_build_ms})").count()
        for n in names
    }
    assert then == in_spark
    assert then["raw.events"] < now["raw.events"]  # our own jobs' events landed with the second ingestion
    assert then["lineage.runs"] < now["lineage.runs"]  # ... and their runs with the second build
    before_all = duck(env, counts_sql(names), "--as-of", "100000d")  # before any table existed: empty
    assert {r["n"] for r in before_all} == {0}


def test_zoned_timestamps_nested_lists_of_structs_and_maps(
    lab_pipeline: Pipeline, spark: SparkSession
) -> None:
    env = lab_pipeline.env
    # Every column of tables holding timestamps with zones, lists of strings and lists of structs.
    catalog = open_catalog(lab_pipeline.settings.catalog)
    for table in ("lineage.column_edges", "lineage.datasets"):
        query = f"SELECT * FROM lab.{table}"
        answer = duck(env, query)
        assert answer and unordered(answer) == unordered(spark_rows(spark, query)), table
        arrow = catalog.load_table(table).scan().to_arrow()
        # pyiceberg reads a null list column as an empty list where DuckDB and Spark read null.
        lists = [f.name for f in arrow.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)]
        as_pyiceberg = [{k: [] if k in lists and v is None else v for k, v in r.items()} for r in answer]
        in_pyiceberg = [plain(row, for_json=True) for row in arrow.to_pylist()]
        assert unordered(in_pyiceberg) == unordered(as_pyiceberg), f"{table}: pyiceberg"
    # No table of the lake holds a map: one is made from each run's tags, in each engine's dialect.
    in_duckdb = duck(
        env,
        "SELECT run_id, started_at, last_event_at, tags, "
        "map_from_entries(list_transform(tags, t -> struct_pack(k := t.key, v := t.value))) AS tag_map "
        "FROM lab.lineage.runs WHERE len(tags) > 0",
    )
    in_spark = spark_rows(
        spark,
        "SELECT run_id, started_at, last_event_at, tags, "
        "map_from_entries(transform(tags, t -> struct(t.key AS k, t.value AS v))) AS tag_map "
        "FROM lab.lineage.runs WHERE size(tags) > 0",
    )
    assert in_duckdb and unordered(in_duckdb) == unordered(in_spark)
    sample = next(r for r in in_duckdb if r["started_at"])
    assert sample["started_at"].endswith("Z")
    assert isinstance(sample["tag_map"], dict) and isinstance(sample["tags"][0], dict)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELEC 1", "Parser Error: syntax error"),
        ("SELECT nope FROM lineage.runs", 'Binder Error: Referenced column "nope" not found'),
    ],
)
def test_bad_sql_is_one_line_and_exit_2(lab_pipeline: Pipeline, query: str, message: str) -> None:
    done = lineage_sql(lab_pipeline.env, query, expect=2)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("lineage: ") and message in lines[0]
