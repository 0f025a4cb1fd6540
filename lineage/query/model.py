"""The lineage model as read: datasets, aliases, jobs, their states, edges and dependencies, each loaded
once per store, only the columns a question needs."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

from lineage.query.errors import LookupError_
from lineage.query.nodes import DATASET, DOWNSTREAM, GRANULARITY_JOB, GRANULARITY_PARENT, JOB, UPSTREAM, Node
from lineage.query.tables import LakeTables, expressions, joined, rows_in

COLUMN_EDGE_KEY = (
    "source_dataset_id",
    "source_field",
    "target_dataset_id",
    "target_field",
    "job_namespace",
    "job_name",
)
COLUMN_EDGE_COLUMNS = (*COLUMN_EDGE_KEY, "transformations", "subtypes", "is_direct", "first_seen")
DATASET_KEY = ("dataset_id", "namespace", "name")
SUMMARY_COLUMNS = (
    "job_namespace",
    "job_name",
    "last_run_state",
    "last_run_id",
    "last_run_reported_state",
    "run_count",
    "lost_runs",
    "failed_runs",
)


class LineageModel(LakeTables):
    """The model tables of one catalog, loaded lazily, one pyiceberg scan per table."""

    # Whole rows (schemas, details) are read only by the commands that show them; a query reads the few
    # columns it walks, column by column, which is what keeps a query on a large estate fast.
    @cached_property
    def datasets(self) -> dict[str, dict]:
        return {r["dataset_id"]: r for r in self.rows("datasets")}

    @cached_property
    def _dataset_columns(self) -> Any:
        return self.arrow("datasets", ("dataset_id", "namespace", "name"))

    @cached_property
    def dataset_nodes(self) -> dict[str, Node]:
        columns = (self._dataset_columns.column(c).to_pylist() for c in DATASET_KEY)
        return {i: Node(DATASET, ns, n, i) for i, ns, n in zip(*columns, strict=True)}

    def dataset_ids(self) -> Any:
        """The ids of the datasets this store holds (a scoped key's store: those it may see), as an Arrow
        array."""
        return self._dataset_columns.column("dataset_id").combine_chunks()

    def nodes_of(self, dataset_ids: Iterable[str]) -> dict[str, Node]:
        """The dataset nodes of some ids (unknown ids left out), without building :attr:`dataset_nodes` for
        every dataset of the estate when it is not built yet."""
        wanted = set(dataset_ids)
        if not wanted:
            return {}
        if "dataset_nodes" in self.__dict__:
            known = self.dataset_nodes
            return {i: node for i in wanted if (node := known.get(i)) is not None}
        found = rows_in(self._dataset_columns, "dataset_id", wanted, DATASET_KEY)
        return {i: Node(DATASET, ns, n, i) for i, ns, n in found}

    def datasets_of(self, dataset_ids: Iterable[str]) -> dict[str, dict]:
        """dataset id -> its whole ``datasets`` row, for some ids: from :attr:`datasets` when it is loaded,
        else one filtered read (a graph shows a few of the estate's datasets, not 50,000 rows of dicts)."""
        ids = sorted(set(dataset_ids))
        if "datasets" in self.__dict__ or not ids:
            return {i: self.datasets[i] for i in ids if i in self.datasets}
        return {r["dataset_id"]: r for r in self.rows("datasets", None, expressions().In("dataset_id", ids))}

    def aliases_for(self, dataset_ids: Iterable[str]) -> dict[str, list[dict]]:
        """:attr:`aliases_of` for some datasets (from it when it is loaded)."""
        ids = set(dataset_ids)
        if "aliases_of" in self.__dict__ or not ids:
            return {i: self.aliases_of[i] for i in ids if i in self.aliases_of}
        columns = ("alias_namespace", "alias_name", "dataset_id", "alias_kind")
        found: dict[str, list[dict]] = {}
        for row in rows_in(self._alias_columns, "dataset_id", ids, columns):
            found.setdefault(row[2], []).append(dict(zip(columns, row, strict=True)))
        return found

    def column_edge_ends(self, edges: Iterable[dict]) -> dict[str, Node]:
        """The dataset nodes at either end of some column edges (those the estate knows)."""
        ends = ("source_dataset_id", "target_dataset_id")
        return self.nodes_of(e[k] for e in edges for k in ends if e[k] is not None)

    @cached_property
    def _alias_columns(self) -> Any:
        return self.arrow("dataset_aliases", ("alias_namespace", "alias_name", "dataset_id", "alias_kind"))

    @cached_property
    def aliases(self) -> list[dict]:
        return list(self._alias_columns.to_pylist())

    @cached_property
    def aliases_of(self) -> dict[str, list[dict]]:
        """dataset id -> its alias rows (every name it is known by, its own included)."""
        found: dict[str, list[dict]] = {}
        for alias in self.aliases:
            found.setdefault(alias["dataset_id"], []).append(alias)
        return found

    @cached_property
    def _job_columns(self) -> Any:
        """The key columns of ``jobs`` (an estate without jobs or datasets is one clear error)."""
        table = self.arrow("jobs", ("job_namespace", "job_name"))
        if not len(table) and not len(self._dataset_columns):
            raise LookupError_("the lineage tables are empty: nothing has been ingested and built yet")
        return table

    @cached_property
    def job_keys(self) -> set[tuple[str, str]]:
        table = self._job_columns
        return set(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))

    @cached_property
    def parent_jobs(self) -> dict[tuple[str, str], tuple[str, str]]:
        """job -> the job of its parent runs (Spark action -> application, Airflow task -> DAG)."""
        table = self.arrow("jobs", ("job_namespace", "job_name", "parent_job_namespace", "parent_job_name"))
        ns, name, pns, pname = (table.column(i).to_pylist() for i in range(4))
        return {
            (a, b): (c, d)
            for a, b, c, d in zip(ns, name, pns, pname, strict=True)
            if c is not None and d is not None and (a, b) != (c, d)
        }

    def collapse(self, job: tuple[str, str], granularity: str) -> tuple[str, str]:
        """The job itself (``job`` granularity) or its parent job, when it has one (``parent``)."""
        return self.parent_jobs.get(job, job) if granularity == GRANULARITY_PARENT else job

    @cached_property
    def jobs(self) -> dict[tuple[str, str], dict]:
        self.job_keys  # noqa: B018 -- the emptiness check
        return {(r["job_namespace"], r["job_name"]): r for r in self.rows("jobs")}

    def job_state(self, namespace: str, name: str) -> tuple[str | None, str | None]:
        """(last run state, last run id) of a job: from :attr:`job_summary` when it is loaded, else from
        two of its columns for the jobs asked about (:meth:`fetch_job_states`): a question shows a few
        jobs, and a dict of every job's summary costs 50 ms at tier M."""
        if "job_summary" in self.__dict__:
            summary = self.job_summary.get((namespace, name), {})
            return summary.get("last_run_state"), summary.get("last_run_id")
        key = (namespace, name)
        if key not in self._job_states:
            self.fetch_job_states([key])
        return self._job_states[key]

    def fetch_job_states(self, keys: Iterable[tuple[str, str]]) -> None:
        """Read the states of these jobs in one filter of ``job_summary`` (a job without one: none)."""
        wanted = {key for key in keys if key not in self._job_states}
        if not wanted or "job_summary" in self.__dict__:
            return
        columns = ("job_namespace", "job_name", "last_run_state", "last_run_id")
        table = self._job_state_columns
        for namespace, name, state, run_id in rows_in(
            table, "job_key", {f"{a}\x00{b}" for a, b in wanted}, columns
        ):
            self._job_states[(namespace, name)] = (state, run_id)
        for key in wanted:
            self._job_states.setdefault(key, (None, None))

    @cached_property
    def _job_state_columns(self) -> Any:
        table = self.arrow("job_summary", ("job_namespace", "job_name", "last_run_state", "last_run_id"))
        return table.append_column("job_key", joined(table, ("job_namespace", "job_name"), "\x00"))

    @cached_property
    def job_summary(self) -> dict[tuple[str, str], dict]:
        return {(r["job_namespace"], r["job_name"]): r for r in self.rows("job_summary", SUMMARY_COLUMNS)}

    def jobs_of(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        """(job namespace, name) -> its whole ``jobs`` row, for some jobs (from :attr:`jobs` when loaded)."""
        return self._job_rows("jobs", None, keys)

    def job_summaries_of(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        """:attr:`job_summary` for some jobs (from it when it is loaded)."""
        return self._job_rows("job_summary", SUMMARY_COLUMNS, keys)

    def _job_rows(
        self, table: str, columns: tuple[str, ...] | None, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], dict]:
        """Some jobs' rows of ``table`` (``jobs`` or ``job_summary``): from the store's dict of that name when
        it is loaded, else one filtered read."""
        wanted = set(keys)
        if table in self.__dict__ or not wanted:
            every = getattr(self, table)
            return {k: every[k] for k in wanted if k in every}
        if table == "jobs":
            self._job_columns  # noqa: B018 -- the emptiness check :attr:`jobs` makes
        names = sorted({name for _, name in wanted})
        rows = self.rows(table, columns, expressions().In("job_name", names))
        return {k: r for r in rows if (k := (r["job_namespace"], r["job_name"])) in wanted}

    @cached_property
    def _edge_columns(self) -> Any:
        return self.arrow("job_edges", ("job_namespace", "job_name", "dataset_id", "direction", "first_seen"))

    @cached_property
    def column_edge_rows(self) -> list[dict]:
        return self.rows("column_edges", COLUMN_EDGE_COLUMNS)

    @cached_property
    def job_dependency_rows(self) -> list[dict]:
        """``lineage.job_dependencies`` (empty for a lake built before the table existed)."""
        try:
            return self.rows("job_dependencies")
        except LookupError_ as exc:
            if "does not exist" in str(exc) or "not held" in str(exc):
                return []
            raise

    def column_tag_rows(self, dataset_ids: Iterable[str]) -> list[dict]:
        """The ``lineage.column_tags`` rows of some datasets (none for a lake built before the table)."""
        ids = sorted(set(dataset_ids))
        if not ids:
            return []
        try:
            return self.rows("column_tags", None, expressions().In("dataset_id", ids))
        except LookupError_ as exc:
            if "does not exist" in str(exc) or "not held" in str(exc):
                return []
            raise

    def column_tags_of(self, dataset_ids: Iterable[str]) -> dict[tuple[str, str], list[dict]]:
        """(dataset id, field) -> its column tags as ``{key, value}`` (the shape of a tags facet entry)."""
        out: dict[tuple[str, str], list[dict]] = {}
        for row in self.column_tag_rows(dataset_ids):
            out.setdefault((row["dataset_id"], row["field"]), []).append(
                {"key": row["tag"], "value": row["value"]}
            )
        return out

    def dependencies_of(self, namespace: str, name: str) -> dict[str, list[dict]]:
        """The jobs ``upstream`` and ``downstream`` of one job (control flow), each row with its source."""
        out: dict[str, list[dict]] = {UPSTREAM: [], DOWNSTREAM: []}
        for row in self.job_dependency_rows:
            if (row["downstream_job_namespace"], row["downstream_job_name"]) == (namespace, name):
                out[UPSTREAM].append(row)
            if (row["upstream_job_namespace"], row["upstream_job_name"]) == (namespace, name):
                out[DOWNSTREAM].append(row)
        return out

    def _dependency_steps(
        self, walk: str, granularity: str = GRANULARITY_JOB
    ) -> dict[tuple[str, str], set[tuple[tuple[str, str], str]]]:
        """job -> {(next job, source)} for one walk direction over ``job_dependencies``."""
        steps: dict[tuple[str, str], set[tuple[tuple[str, str], str]]] = {}
        for row in self.job_dependency_rows:
            up = self.collapse((row["upstream_job_namespace"], row["upstream_job_name"]), granularity)
            down = self.collapse((row["downstream_job_namespace"], row["downstream_job_name"]), granularity)
            if up == down:  # a parent -> child link, or two tasks of one DAG, inside one collapsed job
                continue
            here, there = (down, up) if walk == UPSTREAM else (up, down)
            steps.setdefault(here, set()).add((there, row["source"]))
        return steps

    def job_node(self, namespace: str, name: str) -> Node:
        """The job's node, one object per job for the store's life (its id and label computed once)."""
        key = (namespace, name)
        node = self._job_nodes.get(key)
        if node is None:
            node = self._job_nodes[key] = Node(JOB, namespace, name)
        return node

    # -- resolving names ---------------------------------------------------------------------------------

    @cached_property
    def dataset_tags(self) -> dict[str, list[dict]]:
        return {
            r["dataset_id"]: r["tags"] for r in self.rows("datasets", ("dataset_id", "tags")) if r["tags"]
        }
