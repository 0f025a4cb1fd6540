"""Health along lineage: a dataset's own state (its last write failed or LOST, failing data-quality
assertions, late) and, for any node, the upstream causes that reach it, each with its path.

Judged when the question is asked, from ``run_io`` (who wrote a dataset, when), ``runs`` (how those runs
ended, as of the reader's clock: :func:`lineage.query.liveness.as_of`) and ``quality_results`` (the
assertions facet per run, dataset, column). Freshness is read-time for the same reason LOST is: lateness
grows with the clock, and a dataset's expected interval is the median gap between its own successful
writes, bounded by that one dataset's history (a median is not foldable into per-key state without keeping
the gaps, which ``run_io`` already keeps).
"""

from __future__ import annotations

import itertools
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lineage.query.errors import LookupError_
from lineage.query.liveness import as_of
from lineage.query.nodes import DATASET, JOB, UPSTREAM, Node, Traversal
from lineage.query.tables import expressions, python_rows
from lineage.query.walks import Walks

if TYPE_CHECKING:
    from lineage.query.store import LineageStore

# A dataset's (or a job's) own state, worst first.
FAILING, LATE, OK, UNKNOWN = "failing", "late", "ok", "unknown"
STATE_ORDER = (FAILING, LATE, OK, UNKNOWN)
# Run states that make a dataset's last write a failure.
FAILED_RUN_STATES = ("FAIL", "LOST")
FINISHED_RUN_STATES = ("COMPLETE", "FAIL", "ABORT", "LOST")
RUN_COLUMNS = (
    "run_id",
    "job_namespace",
    "job_name",
    "reported_state",
    "inferred_state",
    "last_event_at",
    "lost_after",
    "ended_at",
    "nominal_start_time",
    "error_message",
)
QUALITY_COLUMNS = ("run_id", "dataset_id", "column_name", "assertion", "success", "checked_at", "problem")


@dataclass
class OwnHealth:
    """What is known of one dataset (or job) by itself, without looking upstream."""

    state: str
    problems: list[dict[str, Any]] = field(default_factory=list)
    freshness: dict[str, Any] | None = None
    assertions: list[dict[str, Any]] = field(default_factory=list)  # the latest result of each

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "problems": self.problems}
        if self.freshness is not None:
            out["freshness"] = self.freshness
        if self.assertions:
            out["assertions"] = self.assertions
        return out


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


class HealthQueries(Walks):
    def own_health(self, dataset_ids: Iterable[str], now: datetime | None = None) -> dict[str, OwnHealth]:
        """Each dataset's own state as of ``now`` (default: the current time): its last finished write (by
        a run whose state is FAIL or LOST: failing), the latest result of each of its assertions (one
        false: failing) and its freshness (late). Datasets with no write and no assertion are ``unknown``."""
        return self.node_health(dataset_ids, (), now)[0]

    def jobs_health(self, jobs: Iterable[Node], now: datetime | None = None) -> dict[Node, OwnHealth]:
        """Each job's own state: its last run's as of ``now`` (FAIL or LOST: failing)."""
        return self.node_health((), jobs, now)[1]

    def node_health(
        self, dataset_ids: Iterable[str], jobs: Iterable[Node], now: datetime | None = None
    ) -> tuple[dict[str, OwnHealth], dict[Node, OwnHealth]]:
        """:meth:`own_health` of some datasets and :meth:`jobs_health` of some jobs, with the runs both
        need (the datasets' writers, the jobs' last runs) read at once: one scan of ``runs`` in the CLI."""
        at = _utc(now) or datetime.now(UTC)
        ids = sorted(set(dataset_ids))
        wanted_jobs = list(dict.fromkeys(jobs))
        writes = self._writes_of(ids)
        self.fetch_job_states((j.namespace, j.name) for j in wanted_jobs)
        last = {job: self.job_state(job.namespace, job.name) for job in wanted_jobs}
        run_ids = {w["run_id"] for w in writes} | {
            run_id for _, run_id in last.values() if run_id is not None
        }
        runs = self._runs_as_of(run_ids, at)
        by_dataset: dict[str, list[tuple[datetime, dict[str, Any]]]] = {}
        for w in writes:
            run = runs.get(w["run_id"])
            if run is None:
                continue
            when = _utc(run.get("ended_at")) or _utc(w["last_seen"]) or _utc(run.get("last_event_at"))
            if when is not None:
                by_dataset.setdefault(w["dataset_id"], []).append((when, run))
        results = self._latest_assertions(ids) if ids else {}
        datasets = {
            ds_id: self._judge(by_dataset.get(ds_id, []), results.get(ds_id, []), at) for ds_id in ids
        }
        return datasets, {job: _job_health(job, state, run_id, runs) for job, (state, run_id) in last.items()}

    def _writes_of(self, ids: list[str]) -> list[dict[str, Any]]:
        """The ``run_io`` output rows of some datasets, but for the runs that only DROPped one (a run that
        only dropped a dataset did not write it)."""
        if not ids:
            return []
        output = expressions().EqualTo("direction", "output")
        columns = ("run_id", "dataset_id", "last_seen", "lifecycle_states")
        writes = python_rows(self.arrow_where("run_io", columns, "dataset_id", ids, output))
        return [w for w in writes if list(w.get("lifecycle_states") or []) != ["DROP"]]

    def _runs_as_of(self, run_ids: Iterable[str], at: datetime) -> dict[str, dict[str, Any]]:
        """run id -> its ``runs`` row (:data:`RUN_COLUMNS`) as of ``at`` (:func:`as_of`)."""
        ids = sorted(set(run_ids))
        if not ids:
            return {}
        return {
            r["run_id"]: as_of(r, at)
            for r in python_rows(self.arrow_where("runs", RUN_COLUMNS, "run_id", ids))
        }

    def _latest_assertions(self, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """dataset id -> the latest result of each (column, assertion), by check time; a failure wins a
        tie. A lake built before ``quality_results`` existed has none."""
        try:
            rows = python_rows(self.arrow_where("quality_results", QUALITY_COLUMNS, "dataset_id", ids))
        except LookupError_ as exc:
            if "does not exist" in str(exc) or "not held" in str(exc):
                return {}
            raise
        latest: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        for row in rows:
            key = (row["dataset_id"], row["column_name"], row["assertion"])
            rank = (_utc(row["checked_at"]), row["success"] is False, row["run_id"])
            held = latest.get(key)
            if held is None or rank > (_utc(held["checked_at"]), held["success"] is False, held["run_id"]):
                latest[key] = row
        out: dict[str, list[dict[str, Any]]] = {}
        for (ds_id, _, _), row in sorted(
            latest.items(), key=lambda item: (item[0][0], item[0][1] or "", item[0][2])
        ):
            out.setdefault(ds_id, []).append(row)
        return out

    def _judge(
        self, writes: list[tuple[datetime, dict[str, Any]]], assertions: list[dict[str, Any]], at: datetime
    ) -> OwnHealth:
        problems: list[dict[str, Any]] = []
        finished = sorted(
            ((when, run) for when, run in writes if run.get("inferred_state") in FINISHED_RUN_STATES),
            key=lambda item: (item[0], item[1]["run_id"]),
        )
        if finished:
            when, run = finished[-1]
            if run["inferred_state"] in FAILED_RUN_STATES:
                problems.append(
                    {
                        "kind": "last_write",
                        "state": run["inferred_state"],
                        "run_id": run["run_id"],
                        "job": f"{run['job_namespace']}/{run['job_name']}",
                        "at": _iso(when),
                        "error": run.get("error_message"),
                    }
                )
        shown = []
        for row in assertions:
            result = {
                "assertion": row["assertion"],
                "column": row["column_name"],
                "success": row["success"],
                "run_id": row["run_id"],
                "checked_at": _iso(_utc(row["checked_at"])),
            }
            if row["problem"]:
                result["problem"] = row["problem"]
            shown.append(result)
            if row["success"] is False:
                problems.append({"kind": "assertion", **result})
        freshness = self._freshness(
            [(when, run) for when, run in finished if run["inferred_state"] == "COMPLETE"], at
        )
        if freshness is not None and freshness["late"]:
            problems.append(
                {
                    "kind": "late",
                    "last_success": freshness["last_success"],
                    "late_after": freshness["late_after"],
                    "expected_interval_seconds": freshness["expected_interval_seconds"],
                }
            )
        if any(p["kind"] != "late" for p in problems):
            state = FAILING
        elif problems:
            state = LATE
        elif writes or assertions:
            state = OK
        else:
            state = UNKNOWN
        return OwnHealth(state, problems, freshness, shown)

    def _freshness(
        self, successes: list[tuple[datetime, dict[str, Any]]], at: datetime
    ) -> dict[str, Any] | None:
        """The expected interval between successful writes (median gap; from the runs' nominal start times
        when every one has one, else from when they wrote) and whether the last one is older than
        ``late_multiplier`` intervals. None with fewer than ``min_writes`` successful writes."""
        health = self.settings.health
        if not successes:
            return None
        last = successes[-1][0]
        nominal = [_utc(run.get("nominal_start_time")) for _, run in successes]
        times = sorted(
            {t for t in nominal if t is not None}
            if all(t is not None for t in nominal)
            else {when for when, _ in successes}
        )
        out: dict[str, Any] = {"last_success": _iso(last), "successful_writes": len(successes)}
        if len(times) < health.min_writes:
            return {**out, "expected_interval_seconds": None, "late_after": None, "late": False}
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
        expected = statistics.median(gaps)
        late_after = last + timedelta(seconds=expected * health.late_multiplier)
        return {
            **out,
            "expected_interval_seconds": expected,
            "late_after": _iso(late_after),
            "late": at > late_after,
        }


def _job_health(
    job: Node, state: str | None, run_id: str | None, runs: dict[str, dict[str, Any]]
) -> OwnHealth:
    """A job's own state from its last run (as of the reader's clock when that run was read)."""
    if run_id in runs:
        state = runs[run_id]["inferred_state"]
    if state is None:
        return OwnHealth(UNKNOWN)
    if state in FAILED_RUN_STATES:
        return OwnHealth(FAILING, [{"kind": "last_run", "state": state, "run_id": run_id, "job": job.label}])
    return OwnHealth(OK)


def upstream_paths(walk: Traversal) -> dict[Node, list[Node]]:
    """Each node an upstream walk reached -> one shortest path from it to the root, following the data
    flow (the node first, the root last; ties broken by label, so the same lake gives the same path)."""
    step: dict[Node, list[Node]] = {}  # node -> the nodes one hop further upstream
    for dataset, job, kind in walk.edges:
        if kind == "output":  # job -> dataset: upstream of the dataset is its writer
            step.setdefault(dataset, []).append(job)
        else:  # dataset -> job: upstream of the job is what it reads
            step.setdefault(job, []).append(dataset)
    towards_root: dict[Node, Node] = {}
    seen = {walk.root}
    queue = deque([walk.root])
    while queue:
        current = queue.popleft()
        for nxt in sorted(step.get(current, ()), key=lambda n: (n.kind, n.label)):
            if nxt not in seen:
                seen.add(nxt)
                towards_root[nxt] = current
                queue.append(nxt)
    paths = {}
    for node in seen:
        path = [node]
        while path[-1] != walk.root:
            path.append(towards_root[path[-1]])
        paths[node] = path
    return paths


def worst(states: Iterable[str]) -> str:
    """The worst of some states (``unknown`` only when nothing is known at all)."""
    found = set(states)
    return next((s for s in STATE_ORDER if s in found), UNKNOWN)


def health_of(store: LineageStore, target: str, now: datetime | None = None) -> dict[str, Any]:
    """A node's own health and every upstream cause that reaches it, as ``lineage health --json``.

    A cause is an upstream dataset whose own state is failing or late, or an upstream job whose last run
    failed or is LOST; each comes with the path (node ids) from it to ``target``.
    """
    at = _utc(now) or datetime.now(UTC)
    root = store.resolve(target)
    walk = store.traverse(root, UPSTREAM, None)
    datasets = [n for n in walk.hops if n.kind == DATASET]
    own, jobs = store.node_health(
        (n.dataset_id or "" for n in datasets), (n for n in walk.hops if n.kind == JOB), at
    )
    paths = upstream_paths(walk)
    causes: list[dict[str, Any]] = []
    for node, hops in sorted(walk.hops.items(), key=lambda item: (item[1], item[0].label)):
        if node == root or node not in paths:
            continue
        health = own.get(node.dataset_id or "") if node.kind == DATASET else jobs.get(node)
        if health is None or health.state not in (FAILING, LATE):
            continue
        causes.append(
            {
                "id": node.id,
                "kind": node.kind,
                "label": node.label,
                "hops": hops,
                "state": health.state,
                "problems": health.problems,
                "path": [n.id for n in paths[node]],
            }
        )
    mine = own[root.dataset_id or ""] if root.kind == DATASET else jobs[root]
    return {
        "node": {"id": root.id, "kind": root.kind, "label": root.label},
        "as_of": _iso(at),
        **mine.json(),
        "upstream": worst(str(c["state"]) for c in causes) if causes else OK,
        "causes": causes,
    }
