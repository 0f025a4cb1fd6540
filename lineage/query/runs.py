"""Runs: a job's runs by state and time, one run by id or prefix, its children and datasets."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from lineage.query import liveness
from lineage.query.errors import LookupError_, UnknownNode
from lineage.query.names import NameResolution
from lineage.query.nodes import JOB
from lineage.query.params import Tag, has_tag
from lineage.query.tables import clamped_times, expressions, python_rows


class RunQueries(NameResolution):
    # -- runs --------------------------------------------------------------------------------------------
    def runs(
        self,
        *,
        job: str | None = None,
        states: Iterable[str] = (),
        since: datetime | None = None,
        limit: int | None = None,
        tags: Sequence[Tag] = (),
        now: datetime | None = None,
    ) -> list[dict]:
        """Runs, newest first, as of ``now`` (default: the current time; :func:`liveness.as_of`): a state
        filter of ``LOST`` finds runs stored LOST and runs stored RUNNING whose deadline has passed since."""
        ex = expressions()
        expr: Any = ex.AlwaysTrue()
        if job:
            node = self.resolve(job)
            if node.kind != JOB:
                raise LookupError_(f"{job!r} is a dataset, not a job")
            same_job = ex.And(ex.EqualTo("job_namespace", node.namespace), ex.EqualTo("job_name", node.name))
            expr = ex.And(expr, same_job)
        wanted = list(states)
        if wanted:
            expr = ex.And(expr, ex.In("inferred_state", liveness.stored_states(wanted)))
        if since is not None:
            expr = ex.And(expr, ex.GreaterThanOrEqual("last_event_at", since.isoformat()))
        at = now or datetime.now(UTC)
        table = self.arrow("runs", None, expr)
        newest_first = _newest_first(table)
        rows: list[dict] = []
        # Sorted first, made into dicts a chunk at a time, so that the first page of a lake's runs (400,000 at
        # tier M) does not make a dict of every run; the filters are per run, so the order is unchanged.
        for start in range(0, len(newest_first), _CHUNK):
            for row in python_rows(table.take(newest_first.slice(start, _CHUNK))):
                run = liveness.as_of(row, at)
                if wanted and run["inferred_state"] not in wanted:
                    continue
                # A run carries a tag when its own tags facet or its job's has it.
                if tags and not (
                    has_tag(run.get("tags"), tags)
                    or has_tag(self.jobs.get((run["job_namespace"], run["job_name"]), {}).get("tags"), tags)
                ):
                    continue
                rows.append(run)
            if limit and len(rows) >= limit:
                break
        return rows[:limit] if limit else rows

    def run(self, run_id: str, now: datetime | None = None) -> dict:
        """One run by id or unique prefix, as of ``now`` (:func:`liveness.as_of`)."""
        text = _run_text(run_id)
        ex = expressions()
        return _one_run(self.rows("runs", row_filter=_run_match(ex, "run_id", text)), run_id, now)

    def children(self, run_id: str, now: datetime | None = None) -> list[dict]:
        ex = expressions()
        return _children(self.rows("runs", row_filter=ex.EqualTo("parent_run_id", run_id)), now)

    def run_and_children(self, run_id: str, now: datetime | None = None) -> tuple[dict, list[dict]]:
        """:meth:`run` and its :meth:`children` from one scan of ``runs`` (a run's answer shows both; each
        scan reads every column of every run)."""
        text = _run_text(run_id)
        ex = expressions()
        either = ex.Or(_run_match(ex, "run_id", text), _run_match(ex, "parent_run_id", text))
        rows = self.rows("runs", row_filter=either)
        found = _one_run([r for r in rows if _matches(r["run_id"], text)], run_id, now)
        return found, _children([r for r in rows if r["parent_run_id"] == found["run_id"]], now)

    def run_datasets(self, run_id: str) -> list[dict]:
        return self.runs_datasets([run_id]).get(run_id, [])

    def runs_datasets(self, run_ids: list[str]) -> dict[str, list[dict]]:
        """run id -> its ``run_io`` rows (``dataset`` added: the dataset's label), read once for all."""
        ex = expressions()
        found: dict[str, list[dict]] = {}
        if not run_ids:
            return found
        match = ex.EqualTo("run_id", run_ids[0]) if len(run_ids) == 1 else ex.In("run_id", list(run_ids))
        rows = self.rows("run_io", row_filter=match)
        nodes = self.nodes_of(r["dataset_id"] for r in rows if r["dataset_id"] is not None)
        for row in rows:
            node = nodes.get(row["dataset_id"])
            row["dataset"] = node.label if node else row["dataset_id"]
            found.setdefault(row["run_id"], []).append(row)
        for rows in found.values():
            rows.sort(key=lambda r: (r["direction"], r["dataset"]))
        return found


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CHUNK = 1000


def _newest_first(table: Any) -> Any:
    """The positions of ``runs`` rows by start (else last event, else never) newest first, ties in table
    order (a stable sort, as Python's of the same key)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not table.num_rows:
        return pa.array([], pa.uint64())
    started, last = (clamped_times(table.column(c)) for c in ("started_at", "last_event_at"))
    key = pc.coalesce(started, last, pa.scalar(_EPOCH, started.type))
    return pc.sort_indices(pa.table({"key": key}), sort_keys=[("key", "descending")])


def _run_text(run_id: str) -> str:
    """A run id or prefix as stored (lower case), or one clear error."""
    text = run_id.strip().lower()
    if not re.fullmatch(r"[0-9a-f-]{4,36}", text):
        raise LookupError_(f"not a run id: {run_id!r} (expected a UUID or a unique prefix of one)")
    return text


def _run_match(ex: Any, column: str, text: str) -> Any:
    """The row filter of a run id (36 characters) or of a prefix of one, on ``column``."""
    return ex.EqualTo(column, text) if len(text) == 36 else ex.StartsWith(column, text)


def _matches(value: str | None, text: str) -> bool:
    """What :func:`_run_match` picks, for one value."""
    return value is not None and (value == text if len(text) == 36 else value.startswith(text))


def _one_run(rows: list[dict], run_id: str, now: datetime | None) -> dict:
    if not rows:
        raise UnknownNode(f"unknown run {run_id!r}")
    if len(rows) > 1:
        raise LookupError_(f"run id prefix {run_id!r} matches {len(rows)} runs; give more characters")
    return liveness.as_of(rows[0], now)


def _children(rows: list[dict], now: datetime | None) -> list[dict]:
    at = now or datetime.now(UTC)
    return sorted(
        (liveness.as_of(r, at) for r in rows), key=lambda r: r["started_at"] or r["last_event_at"] or _EPOCH
    )
