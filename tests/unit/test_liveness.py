"""Run liveness at read time (lineage.query.liveness): what grows with the clock is derived by the reader,
from the stored deadline ``lost_after``, never stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from lineage.query import answers
from lineage.query.liveness import as_of, stored_states
from lineage.serve import marquez
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
DEADLINE = T0 + timedelta(seconds=900)
REASON = "no event since 2026-11-20T08:00:00Z: LOST after 2026-11-20T08:15:00Z (threshold 900 s: x)"
TS = pa.timestamp("us", tz="UTC")
RUNNING_ID, LOST_ID, DONE_ID = (f"{n}{n}{n}{n}{n}{n}{n}{n}-0000-4000-8000-000000000000" for n in "123")


def running_row(**changes: object) -> dict:
    row = {
        "run_id": RUNNING_ID,
        "job_namespace": "etl",
        "job_name": "stream",
        "reported_state": "RUNNING",
        "inferred_state": "RUNNING",
        "liveness_reason": REASON,
        "started_at": T0 - timedelta(hours=1),
        "ended_at": None,
        "last_event_at": T0,
        "threshold_seconds": 900.0,
        "lost_after": DEADLINE,
    }
    return {**row, **changes}


def test_a_running_row_is_running_before_its_deadline_and_lost_from_it_on() -> None:
    row = running_row()
    before = as_of(row, DEADLINE - timedelta(seconds=1))
    assert (before["inferred_state"], before["silent_seconds"]) == ("RUNNING", 899.0)
    on = as_of(row, DEADLINE)
    assert (on["inferred_state"], on["silent_seconds"]) == ("LOST", 900.0)
    after = as_of(row, DEADLINE + timedelta(hours=1))
    assert (after["inferred_state"], after["silent_seconds"]) == ("LOST", 4500.0)
    # The stored reason says when it turns LOST: true either way, so it is shown unchanged.
    assert before["liveness_reason"] == after["liveness_reason"] == REASON
    assert row["inferred_state"] == "RUNNING" and "silent_seconds" not in row  # the row itself is kept


def test_naive_times_are_utc() -> None:
    row = running_row(last_event_at=T0.replace(tzinfo=None), lost_after=DEADLINE.replace(tzinfo=None))
    assert as_of(row, DEADLINE.replace(tzinfo=None))["inferred_state"] == "LOST"
    assert as_of(row, DEADLINE - timedelta(seconds=1))["silent_seconds"] == 899.0


def test_terminal_parent_only_and_stored_lost_runs_are_unchanged() -> None:
    late = T0 + timedelta(days=30)
    done = as_of(running_row(reported_state="COMPLETE", inferred_state="COMPLETE", lost_after=None), late)
    assert (done["inferred_state"], done["silent_seconds"]) == ("COMPLETE", None)
    parent = as_of(running_row(reported_state=None, inferred_state="UNKNOWN", lost_after=None), late)
    assert (parent["inferred_state"], parent["silent_seconds"]) == ("UNKNOWN", None)
    lost = as_of(running_row(inferred_state="LOST"), DEADLINE - timedelta(seconds=1))
    assert lost["inferred_state"] == "LOST"  # stored LOST by a build at its deadline: stays LOST


def test_a_lost_filter_also_reads_stored_running_rows() -> None:
    assert stored_states(["LOST"]) == ["LOST", "RUNNING"]
    assert stored_states(["RUNNING", "LOST"]) == ["RUNNING", "LOST"]
    assert stored_states(["FAIL"]) == ["FAIL"]


def _store() -> IndexedStore:
    rows = [
        running_row(),
        running_row(run_id=LOST_ID, inferred_state="LOST"),
        running_row(run_id=DONE_ID, reported_state="COMPLETE", inferred_state="COMPLETE", lost_after=None),
    ]
    schema = pa.schema(
        [
            (c, pa.string())
            for c in ("run_id", "job_namespace", "job_name", "reported_state", "inferred_state")
        ]
        + [("liveness_reason", pa.string())]
        + [(c, TS) for c in ("started_at", "ended_at", "last_event_at")]
        + [("threshold_seconds", pa.float64()), ("lost_after", TS)]
    )
    strings = {c: pa.array([], pa.string()) for c in ("run_id", "dataset_id", "direction")}
    empty = {
        "jobs": pa.table({"job_namespace": ["etl"], "job_name": ["stream"]}),
        "run_io": pa.table({**strings, "first_seen": pa.array([], TS)}),
        # read for the run's job version (lineage.query.versions): no job or dataset rows here
        "datasets": pa.table({c: pa.array([], pa.string()) for c in ("dataset_id", "namespace", "name")}),
    }
    return IndexedStore(Settings(), {"runs": pa.Table.from_pylist(rows, schema=schema), **empty})


def test_the_store_answers_runs_as_of_the_readers_clock() -> None:
    store = _store()
    before, after = DEADLINE - timedelta(seconds=1), DEADLINE + timedelta(seconds=1)
    assert [r["run_id"] for r in store.runs(states=["LOST"], now=before)] == [LOST_ID]
    assert sorted(r["run_id"] for r in store.runs(states=["LOST"], now=after)) == [RUNNING_ID, LOST_ID]
    assert [r["run_id"] for r in store.runs(states=["RUNNING"], now=before)] == [RUNNING_ID]
    assert store.runs(states=["RUNNING"], now=after) == []
    one = store.run(RUNNING_ID, now=after)
    assert (one["inferred_state"], one["silent_seconds"]) == ("LOST", 901.0)
    # Every front end shows the derived state: the CLI's JSON and the read API's Marquez run.
    shown = answers.run_json(one)
    assert (shown["inferred_state"], shown["silent_seconds"]) == ("LOST", 901.0)
    assert shown["lost_after"] == "2026-11-20T08:15:00Z"
    api = marquez.run_json(store, one)
    assert (api["state"], api["inferredState"], api["livenessReason"]) == ("RUNNING", "LOST", REASON)
