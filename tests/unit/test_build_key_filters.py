"""The build's reads of a few runs or jobs: a literal ``IN`` list when the keys are at most a limit, the
semi-join alone above it, the same rows either way (the build tests' small lakes only take the first
path; a large delta takes the second)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage.batch.build import _few, _of_jobs, _of_runs


def _rows(frame: DataFrame) -> list[tuple]:
    return sorted(tuple(row) for row in frame.collect())


def test_a_key_list_is_given_up_to_its_limit_and_left_out_above_it(spark: SparkSession) -> None:
    keys = spark.createDataFrame([("r1",), ("r2",), ("r2",), (None,)], "run_id string")

    listed = _few(keys, "run_id", "other", limit=2)
    assert listed is not None
    frame = spark.createDataFrame([("r1",), ("r2",), ("r3",)], "other string")
    assert _rows(frame.where(listed)) == [("r1",), ("r2",)]
    assert _few(keys, "run_id", "other", limit=1) is None
    nothing = _few(keys.where(F.col("run_id").isNull()), "run_id", "other")
    assert nothing is not None and frame.where(nothing).count() == 0


def test_runs_and_jobs_read_with_or_without_the_list_give_the_same_rows(spark: SparkSession) -> None:
    facts = spark.createDataFrame(
        [
            ("r1", None, "ns", "a", 1),
            ("r2", "r1", "ns", "b", 2),
            ("r3", "r1", "other", "a", 3),
            ("r4", None, "ns", "c", 4),
        ],
        "run_id string, parent_run_id string, job_namespace string, job_name string, n int",
    )
    runs = spark.createDataFrame([("r1",), ("r3",), ("r9",)], "run_id string")
    listed = _rows(_of_runs(facts, runs))
    assert sorted(row.run_id for row in _of_runs(facts, runs).collect()) == ["r1", "r3"]
    assert _rows(_of_runs(facts, runs, limit=2)) == listed  # three runs: no list, the join alone
    children = _of_runs(facts, runs, "parent_run_id")
    assert _rows(children) == _rows(_of_runs(facts, runs, "parent_run_id", limit=0))
    assert sorted(row.run_id for row in children.collect()) == ["r2", "r3"]

    jobs = spark.createDataFrame([("ns", "a"), ("ns", "b")], "job_namespace string, job_name string")
    by_list = _rows(_of_jobs(facts, jobs, _few(jobs, "job_name", "job_name")))
    # r3's job has one of the names, in another namespace.
    assert sorted(row.run_id for row in _of_jobs(facts, jobs, None).collect()) == ["r1", "r2"]
    assert _rows(_of_jobs(facts, jobs, _few(jobs, "job_name", "job_name", limit=1))) == by_list
