"""The benchmark workload: deterministic for a seed, shaped as issue 6 asks, valid where meant to be.

Shape properties are measured on the generated messages of a small tier (not read back from the generator's
own bookkeeping), with tolerances for sampling noise.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from benchmarks.workload import (
    DELTA_PARTS,
    HISTORY_EVENTS,
    MALFORMED_KINDS,
    Message,
    Shape,
    Spec,
    Tier,
    Workload,
    build_estate,
    malformed,
    read_spool,
    write_spool,
)
from lineage.events.validate import validate
from lineage.ingest import verdicts
from lineage.transforms import envelope as env

TINY = Tier("T", jobs=400, datasets=800, events=8_000, days=1)
KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


@pytest.fixture(scope="module")
def messages() -> list[Message]:
    return list(Workload(TINY, seed=7).messages("base"))


@pytest.fixture(scope="module")
def events(messages: list[Message]) -> list[dict[str, Any]]:
    return [json.loads(m.value) for m in messages if m.kind == "event" and m.value]


def _digest(ms: list[Message]) -> str:
    h = hashlib.sha256()
    for m in ms:
        h.update(repr((m.key, m.value, m.kind, m.reason)).encode())
    return h.hexdigest()


def test_same_seed_same_messages_other_seed_other_messages(messages: list[Message]) -> None:
    again = list(Workload(TINY, seed=7).messages("base"))
    assert _digest(again) == _digest(messages)
    other = list(Workload(TINY, seed=8).messages("base"))
    assert _digest(other) != _digest(messages)


def test_deterministic_across_processes_and_hash_seeds(messages: list[Message]) -> None:
    script = (
        "import hashlib, sys\n"
        "from benchmarks.workload import Tier, Workload\n"
        "h = hashlib.sha256()\n"
        "for m in Workload(Tier('T', 400, 800, 8000, 1), seed=7).messages('base'):\n"
        "    h.update(repr((m.key, m.value, m.kind, m.reason)).encode())\n"
        "print(h.hexdigest())\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=Path(__file__).resolve().parents[2],  # benchmarks/ is imported from the repository root
    )
    assert child.stdout.strip() == _digest(messages)


def test_size_close_to_the_tier(messages: list[Message]) -> None:
    assert 0.85 * TINY.events <= len(messages) <= 1.15 * TINY.events


def test_delta_parts_are_about_one_percent_each_and_partition_the_stream(messages: list[Message]) -> None:
    workload = Workload(TINY, seed=7)
    parts = Counter(part for _, part in workload.stream())
    assert parts[0] == len(messages)
    for k in range(1, DELTA_PARTS + 1):
        assert 0.003 * len(messages) <= parts[k] <= 0.03 * len(messages), (k, parts[k])
    assert sum(1 for _ in workload.messages("delta2")) == parts[2]


def test_most_jobs_have_no_datasets(events: list[dict[str, Any]]) -> None:
    jobs = {(e["job"]["namespace"], e["job"]["name"]) for e in events}
    with_io = {
        (e["job"]["namespace"], e["job"]["name"]) for e in events if e.get("inputs") or e.get("outputs")
    }
    assert 0.5 < 1 - len(with_io) / len(jobs) < 0.85


def _inputs_by_job(events: list[dict[str, Any]]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    inputs: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for e in events:
        for d in e.get("inputs", []):
            inputs[(e["job"]["namespace"], e["job"]["name"])].add((d["namespace"], d["name"]))
    return inputs


def test_mean_fan_in_between_two_and_three(events: list[dict[str, Any]]) -> None:
    inputs = _inputs_by_job(events)
    assert 2.0 <= statistics.mean(len(v) for v in inputs.values()) <= 3.0


def test_one_percent_of_datasets_are_hubs_read_by_about_thirty_percent_of_reading_jobs(
    events: list[dict[str, Any]],
) -> None:
    estate = build_estate(TINY, seed=7)
    assert sum(d.hub for d in estate.datasets) == round(TINY.datasets * 0.01)
    hubs = estate.hub_names
    inputs = _inputs_by_job(events)
    share = sum(1 for names in inputs.values() if names & hubs) / len(inputs)
    assert 0.2 <= share <= 0.4
    # and a hub is read by many jobs (under either of its names), an ordinary dataset by few
    names = {}
    for d in estate.datasets:
        names[(d.namespace, d.name)] = d.index
        if d.catalog:
            names[d.catalog] = d.index
    readers = Counter(names.get(name, name) for v in inputs.values() for name in {names.get(n, n) for n in v})
    hub_ids = {d.index for d in estate.datasets if d.hub}
    hub_readers = statistics.mean(readers[h] for h in hub_ids)
    other_readers = statistics.mean(n for key, n in readers.items() if key not in hub_ids)
    assert hub_readers > 3 * other_readers


def test_column_counts_are_log_normal_with_a_long_tail() -> None:
    columns = sorted(d.columns for d in build_estate(Tier("C", 2_000, 20_000, 1_000, 1), seed=3).datasets)
    assert 15 <= statistics.median(columns) <= 25
    assert columns[int(len(columns) * 0.999)] >= 150
    assert columns[-1] <= 400


def test_column_lineage_on_about_half_of_the_outputs(events: list[dict[str, Any]]) -> None:
    finals = [
        o
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"
        for o in e.get("outputs", [])
    ]
    share = sum("columnLineage" in o["facets"] for o in finals) / len(finals)
    assert 0.35 <= share <= 0.65


def test_duplicates_late_and_malformed_rates(messages: list[Message], events: list[dict[str, Any]]) -> None:
    kinds = Counter(m.kind for m in messages)
    assert 0.005 <= kinds["duplicate"] / len(messages) <= 0.02
    assert 1 <= kinds["malformed"] <= 0.004 * len(messages)
    originals = {m.value for m in messages if m.kind == "event"}
    assert all(m.value in originals for m in messages if m.kind == "duplicate")
    latest = ""
    late = 0
    for e in events:
        if e["eventTime"] < latest:
            late += 1
        latest = max(latest, e["eventTime"])
    assert 0.004 <= late / len(events) <= 0.02


def test_event_sizes(messages: list[Message]) -> None:
    sizes = sorted(len(m.value) for m in messages if m.kind == "event" and m.value)
    assert sizes[0] >= 600
    assert 1_000 <= sizes[len(sizes) // 2] <= 10_000
    assert sizes[int(len(sizes) * 0.99)] <= 120_000


def test_oversized_events_exist_and_stay_valid_json() -> None:
    shape = Shape(oversized_rate=0.01)
    big = [
        m for m in Workload(TINY, seed=7, shape=shape).messages("base") if len(m.value or b"") > 1024 * 1024
    ]
    assert big
    event = json.loads(big[0].value or b"")
    assert "spark.logicalPlan" in event["run"]["facets"]


def test_airflow_dag_task_spark_application_and_job_chain(events: list[dict[str, Any]]) -> None:
    by_run = {e["run"]["runId"]: e for e in events if e["eventType"] == "START"}
    job_types = Counter(e["job"]["facets"]["jobType"]["jobType"] for e in events)
    assert {"DAG", "TASK", "APPLICATION", "SQL_JOB", "JOB"} <= set(job_types)
    chains = 0
    for e in events:
        if e["job"]["facets"]["jobType"]["jobType"] != "SQL_JOB":
            continue
        app = by_run.get(e["run"]["facets"]["parent"]["run"]["runId"])
        if app is None or "parent" not in app["run"]["facets"]:
            continue
        task = by_run.get(app["run"]["facets"]["parent"]["run"]["runId"])
        assert task is not None and task["job"]["facets"]["jobType"]["jobType"] == "TASK"
        dag_run = task["run"]["facets"]["parent"]["run"]["runId"]
        assert e["run"]["facets"]["parent"]["root"]["run"]["runId"] == dag_run
        assert by_run[dag_run]["job"]["facets"]["jobType"]["jobType"] == "DAG"
        chains += 1
    assert chains > 100
    spark_jobs_per_app = Counter(
        e["run"]["facets"]["parent"]["run"]["runId"]
        for e in events
        if e["eventType"] == "START" and e["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"
    )
    assert min(spark_jobs_per_app.values()) >= 1 and max(spark_jobs_per_app.values()) <= 20


def test_flink_runs_send_heartbeats_and_some_never_end(events: list[dict[str, Any]]) -> None:
    flink = defaultdict(list)
    for e in events:
        if e["job"]["facets"]["jobType"]["integration"] == "FLINK":
            flink[e["run"]["runId"]].append(e["eventType"])
    assert flink
    assert all("RUNNING" in types for types in flink.values() if "START" in types and len(types) > 2)
    terminal = {"COMPLETE", "ABORT", "FAIL"}
    assert any(not terminal & set(types) for types in flink.values())
    assert any(terminal & set(types) for types in flink.values())


def test_symlinked_physical_and_catalog_names(events: list[dict[str, Any]]) -> None:
    symlinked = [
        d
        for e in events
        for d in e.get("inputs", []) + e.get("outputs", [])
        if "symlinks" in d.get("facets", {})
    ]
    assert symlinked
    catalog_names = {
        (i["namespace"], i["name"]) for d in symlinked for i in d["facets"]["symlinks"]["identifiers"]
    }
    reported = {
        (d["namespace"], d["name"]) for e in events for d in e.get("inputs", []) + e.get("outputs", [])
    }
    assert catalog_names & reported, "some producer reports the catalog name itself (SQL tasks)"


def test_run_ids_are_uuid7(events: list[dict[str, Any]]) -> None:
    assert all(uuid.UUID(e["run"]["runId"]).version == 7 for e in events)


def test_kafka_key_is_the_root_job(events: list[dict[str, Any]], messages: list[Message]) -> None:
    for m in messages[:500]:
        if m.kind != "event" or not m.value:
            continue
        e = json.loads(m.value)
        root = e["run"]["facets"].get("parent", {}).get("root", {}).get("job") or e["job"]
        assert m.key == f"run:{root['namespace']}/{root['name']}".encode()


def test_spool_round_trip(tmp_path: Path, messages: list[Message]) -> None:
    sample = [*messages[:300], Message(None, None, "malformed", "EMPTY_VALUE"), Message(b"k", b"", "event")]
    write_spool(tmp_path / "x.spool", sample)
    back = list(read_spool(tmp_path / "x.spool"))
    assert [(m.key, m.value) for m in back] == [(m.key, m.value) for m in sample]


# -- the fixed-size history delta --------------------------------------------------------------------------

OTHER = Tier("U", jobs=900, datasets=1_700, events=20_000, days=3)  # another estate, another window


def test_history_delta_has_exactly_its_size_whatever_the_tier() -> None:
    for tier in (TINY, OTHER):
        assert sum(1 for _ in Workload(tier, seed=7).history()) == HISTORY_EVENTS == 10_000
    assert sum(1 for _ in Workload(TINY, seed=7).history(250)) == 250


def test_history_delta_is_deterministic_for_a_seed() -> None:
    first = list(Workload(TINY, seed=7).history())
    assert _digest(list(Workload(TINY, seed=7).history())) == _digest(first)
    assert [(m.key, m.value) for m in Workload(TINY, seed=7).messages("history")] == [
        (m.key, m.value) for m in first
    ]
    assert _digest(list(Workload(TINY, seed=8).history())) != _digest(first)


def test_history_delta_runs_start_at_the_same_times_with_the_same_kinds_on_every_tier() -> None:
    def schedule(tier: Tier) -> list[tuple[Any, str, int]]:
        workload = Workload(tier, seed=7)
        units = workload.estate.units
        runs = itertools.islice(workload._history_schedule(), 500)
        return [(at - workload.end, units[u].kind == "flink", n) for at, u, n in runs]

    assert schedule(TINY) == schedule(OTHER)


def test_history_delta_comes_after_the_window_with_new_runs_and_the_usual_noise() -> None:
    workload = Workload(TINY, seed=7)
    history = list(workload.history())
    kinds = Counter(m.kind for m in history)
    assert 0.005 * HISTORY_EVENTS <= kinds["duplicate"] <= 0.02 * HISTORY_EVENTS
    assert kinds["malformed"] <= 0.005 * HISTORY_EVENTS
    events = [json.loads(m.value) for m in history if m.kind == "event" and m.value]
    end = workload.end.isoformat().replace("+00:00", "")
    assert min(e["eventTime"] for e in events) >= end
    flink = sum(1 for e in events if e["producer"].endswith("/flink"))
    assert 0.04 <= flink / len(events) <= 0.12
    window_runs = {
        json.loads(m.value)["run"]["runId"] for m, _ in workload.stream() if m.kind == "event" and m.value
    }
    assert not window_runs & {e["run"]["runId"] for e in events}


def test_tagged_source_event_tags_a_source_column_that_a_direct_identity_edge_copies() -> None:
    workload = Workload(TINY, seed=7)
    message, about = workload.tagged_source()
    assert (message.kind, message.key) == ("event", f"run:{about['job']}".encode())
    event = json.loads(message.value)
    assert (event["eventType"], event["run"]["runId"]) == ("COMPLETE", about["run_id"])
    assert f"{event['job']['namespace']}/{event['job']['name']}" == about["job"]
    tagged = [n for n in event["inputs"] if "tags" in n["facets"]]
    assert [f"{n['namespace']}/{n['name']}" for n in tagged] == [about["dataset"]]
    (node,) = tagged
    assert node["facets"]["tags"]["tags"] == [
        {"key": "pii", "value": "true", "source": "benchmark", "field": about["field"]}
    ]
    assert about["field"] in {f["name"] for f in node["facets"]["schema"]["fields"]}
    sources = {(d.namespace, d.name) for d in workload.estate.datasets if d.source}
    assert (node["namespace"], node["name"]) in sources
    copies = [
        ref
        for out in event["outputs"]
        for spec in out["facets"].get("columnLineage", {}).get("fields", {}).values()
        for ref in spec["inputFields"]
        if (ref["namespace"], ref["name"], ref["field"]) == (node["namespace"], node["name"], about["field"])
        and (ref["transformations"][0]["type"], ref["transformations"][0]["subtype"])
        == ("DIRECT", "IDENTITY")
    ]
    assert copies
    # After every event of the history delta, before the benchmarks' reference time (an hour past the end).
    history = [json.loads(m.value)["eventTime"] for m in workload.history() if m.kind == "event" and m.value]
    assert max(history) < event["eventTime"] == about["event_time"]
    assert event["eventTime"] < (workload.end + timedelta(hours=1)).isoformat().replace("+00:00", "")
    assert (message, about) == Workload(TINY, seed=7).tagged_source()
    assert validate(message.value).valid  # what the ingestion and the HTTP intake accept


class _Pick(random.Random):
    """A generator whose ``randrange`` returns a chosen value (to force each kind of malformed message)."""

    def __init__(self, pick: int) -> None:
        super().__init__(0)
        self.pick = pick

    def randrange(self, *_args: Any, **_kwargs: Any) -> int:  # type: ignore[override]
        return self.pick


def every_kind_of_malformed() -> list[Message]:
    job = build_estate(TINY, seed=7).jobs[0]
    spec = Spec(datetime(2026, 10, 1, tzinfo=UTC), "START", job, str(uuid.uuid4()), "https://example.com/p")
    return [malformed(spec, _Pick(kind)) for kind in range(MALFORMED_KINDS)]


def test_valid_messages_pass_envelope_validation_and_malformed_get_their_reason(
    spark: SparkSession, messages: list[Message]
) -> None:
    # Every eighth event (each producer and event type of the workload is among them), every duplicate and
    # malformed message of the workload, and one message of each rejection reason.
    kept = [m for i, m in enumerate(messages) if m.kind != "event" or i % 8 == 0]
    sample = [*kept, *every_kind_of_malformed()]
    assert {m.reason for m in sample if m.kind == "malformed"} == set(env.REASONS)
    rows = [(m.key, m.value, "bench", 0, i, datetime(2026, 10, 1)) for i, m in enumerate(sample)]
    parsed = verdicts.parse_messages(
        spark.createDataFrame(rows, KAFKA_SCHEMA), max_future_seconds=86_400
    ).select("kafka_offset", "reason")
    got = {r["kafka_offset"]: r["reason"] for r in parsed.collect()}
    for i, m in enumerate(sample):
        assert got[i] == m.reason, (i, m.kind, m.reason, got[i], (m.value or b"")[:200])
