"""A run and its children from one scan of runs (lineage.query.runs.RunQueries.run_and_children): the same
answers as run() and children(), by id or by prefix, on a small inline runs table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lineage.query.errors import LookupError_, UnknownNode
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
PARENT = "aaaa0000-0000-4000-8000-000000000001"
OTHER = "aaaa1111-0000-4000-8000-000000000002"  # shares a prefix with PARENT
CHILDREN = ["bbbb0000-0000-4000-8000-000000000002", "bbbb0000-0000-4000-8000-000000000001"]


def _store() -> IndexedStore:
    def row(run_id: str, parent: str | None, minutes: int) -> dict:
        return {
            "run_id": run_id, "parent_run_id": parent, "job_namespace": "etl", "job_name": "j",
            "reported_state": "COMPLETE", "inferred_state": "COMPLETE",
            "started_at": T0 + timedelta(minutes=minutes), "last_event_at": T0 + timedelta(minutes=minutes),
            "lost_after": None,
        }  # fmt: skip

    rows = [row(CHILDREN[0], PARENT, 3), row(PARENT, None, 0), row(CHILDREN[1], PARENT, 1)]
    rows += [row(OTHER, None, 5), row("cccc0000-0000-4000-8000-000000000003", OTHER, 6)]
    strings = ["run_id", "parent_run_id", "job_namespace", "job_name", "reported_state", "inferred_state"]
    schema = pa.schema(
        [(c, pa.string()) for c in strings] + [(c, TS) for c in ("started_at", "last_event_at", "lost_after")]
    )
    return IndexedStore(Settings(), {"runs": pa.Table.from_pylist(rows, schema=schema)})


@pytest.mark.parametrize("asked", [PARENT, PARENT.upper(), PARENT[:8], OTHER])
def test_one_scan_answers_what_run_and_children_answer(asked: str) -> None:
    store = _store()
    run, children = store.run_and_children(asked, T0)
    assert run == store.run(asked, T0)
    assert children == store.children(run["run_id"], T0)


def test_children_come_in_start_order() -> None:
    _, children = _store().run_and_children(PARENT, T0)
    assert [c["run_id"] for c in children] == sorted(CHILDREN, key=lambda c: c.endswith("2"))


def test_an_ambiguous_prefix_and_an_unknown_run_are_clear_errors() -> None:
    with pytest.raises(LookupError_, match="matches 2 runs"):
        _store().run_and_children("aaaa")
    with pytest.raises(UnknownNode):
        _store().run_and_children("dddd0000")
    with pytest.raises(LookupError_, match="not a run id"):
        _store().run_and_children("xyz")


def test_runs_come_newest_first_and_a_page_stops_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sorted before they are made into dicts, a chunk at a time: the same page as sorting every run."""
    from lineage.query import runs as runs_module

    monkeypatch.setattr(runs_module, "_CHUNK", 2)
    store = _store()
    every = store.runs(now=T0)
    assert [r["run_id"] for r in every] == [
        "cccc0000-0000-4000-8000-000000000003", OTHER, CHILDREN[0], CHILDREN[1], PARENT
    ]  # fmt: skip
    assert store.runs(now=T0, limit=3) == every[:3]
    assert store.runs(now=T0, limit=2, states=["COMPLETE"]) == every[:2]
    assert store.runs(now=T0, states=["FAIL"]) == []
