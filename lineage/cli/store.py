"""Read ``lake.lineage.*`` with pyiceberg (no JVM) and answer lineage questions over it.

Nodes are jobs and canonical datasets; ``job_edges`` links them (a dataset is an ``input`` of a job, a job
``output``s a dataset). A hop is one such edge, so a dataset's producers are 1 hop upstream and the
datasets those producers read are 2 hops upstream. Column lineage follows ``column_edges``; a column edge
crosses one job, i.e. two hops.
"""

from __future__ import annotations

import difflib
import re
from collections import deque
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from lineage.settings import Settings

JOB, DATASET = "job", "dataset"
UPSTREAM, DOWNSTREAM, BOTH = "upstream", "downstream", "both"
VIA_DATASETS, VIA_DEPENDENCIES, VIA_BOTH = "datasets", "dependencies", "both"  # what a walk follows
GRANULARITY_JOB, GRANULARITY_PARENT = "job", "parent"  # a job as reported, or collapsed into its parent
TERMINAL_STATES = ("COMPLETE", "FAIL", "ABORT")
# Field name shown for the dataset side of a dataset-level column edge (a filter or join key that
# affects every row of the target, but no one field).
WHOLE_DATASET = "*"


class LookupError_(Exception):
    """A question that cannot be answered: unknown node, empty catalog, bad input. One line for users."""


class UnknownNode(LookupError_):
    """The node, field or run asked about does not exist (the read API answers 404, with the suggestions)."""

    def __init__(self, message: str, suggestions: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.suggestions = list(suggestions)


def display_name(namespace: str, name: str) -> str:
    """``namespace/name`` the way people write dataset URIs (``file`` + ``/x`` becomes ``file:///x``)."""
    if name.startswith("/"):
        return f"{namespace}{'' if '://' in namespace else '://'}{name}"
    return f"{namespace}/{name}"


def node_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}:{namespace}/{name}"


_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

# The largest integer a parameter takes (a signed 64-bit integer): a larger ``--depth``/``depth`` is
# refused as bad input (it would overflow the JSON encoder and Arrow), not answered with an error.
MAX_INT = 2**63 - 1


def shown_value(text: str, limit: int = 40) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters (a 5,000-digit value is one line)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """ISO-8601 (``2026-11-20``, ``2026-11-20T08:00:00Z``, naive = UTC) or a relative ``30m``/``2h``/``7d``.

    Raises:
        LookupError_: anything else, and a time outside the years 1-9999 (``999999999d`` ago).
    """
    value = text.strip()
    relative = _RELATIVE.match(value.lower())
    if relative:
        try:
            delta = timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
            return (now or datetime.now(UTC)) - delta
        except (OverflowError, ValueError):  # beyond timedelta/datetime, or past int()'s 4,300 digits
            raise LookupError_(
                f"bad time {shown_value(text)}: too far in the past (before the year 1)"
            ) from None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise LookupError_(
            f"bad time {shown_value(text)}: expected ISO-8601 (2026-11-20, 2026-11-20T08:00:00Z) "
            "or relative (30m, 2h, 7d)"
        ) from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)  # 0001-01-01T00:00:00+01:00 is before the year 1 in UTC
    except OverflowError:
        raise LookupError_(f"bad time {shown_value(text)}: outside the years 1-9999 in UTC") from None
    return parsed


class _NodeKey(NamedTuple):
    kind: str
    namespace: str
    name: str
    dataset_id: str | None = None


class Node(_NodeKey):
    """A job or a canonical dataset.

    A named tuple, so hashing and equality run in C (a walk does both hundreds of thousands of times for a
    large answer: a frozen dataclass's Python ``__hash__``/``__eq__`` took 12 ms of a 6,633-node answer at
    tier M); a subclass without ``__slots__``, so ``id`` and ``label`` are kept once computed.
    """

    @cached_property
    def id(self) -> str:
        return node_id(self.kind, self.namespace, self.name)

    @cached_property
    def label(self) -> str:
        if self.kind == DATASET:
            return display_name(self.namespace, self.name)
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Field:
    dataset: Node
    field: str

    @property
    def label(self) -> str:
        return f"{self.dataset.label}.{self.field}"


@dataclass
class Traversal:
    """Nodes reached from a root with their hop counts, the edges followed and the column paths."""

    root: Node
    direction: str
    depth: int | None
    hops: dict[Node, int] = field(default_factory=dict)
    edges: set[tuple[Node, Node, str]] = field(default_factory=set)  # (dataset, job, input|output)
    # Job-to-job dependencies followed (--via dependencies|both): (upstream job, downstream job, source).
    job_links: set[tuple[Node, Node, str]] = field(default_factory=set)
    columns: dict[Field, int] = field(default_factory=dict)  # reached fields -> jobs crossed
    column_edges: list[dict[str, Any]] = field(default_factory=list)


class LineageStore:
    """The lineage tables of one catalog, loaded lazily, one pyiceberg scan per table."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._catalog: Any = None
        self._job_nodes: dict[tuple[str, str], Node] = {}
        self._job_states: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        self.node_payloads: dict[Node, dict[str, Any]] = {}  # lineage.cli.main.node_json's, per node

    # -- loading -----------------------------------------------------------------------------------------
    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            cat = self.settings.catalog
            if cat.embedded and not Path(cat.sqlite_path).is_file():
                raise LookupError_(_no_catalog(cat.sqlite_path))
            from lineage.io.catalog import open_catalog

            try:
                self._catalog = open_catalog(cat)
            except Exception as exc:
                where = cat.sqlite_path if cat.embedded else cat.properties.get("uri", "?")
                raise LookupError_(
                    f"cannot open catalog {cat.name!r} at {where}: {_first_line(exc)}"
                ) from exc
        return self._catalog

    def _embedded_table(self, ident: tuple[str, str]) -> Any:
        """A table of the embedded catalog, read-only and without SQLAlchemy: its current metadata file is
        looked up in the JDBC catalog's ``iceberg_tables`` (the schema Spark and pyiceberg share) and opened
        as a static table. Half of a short query's start-up was importing and opening the SQL catalog.
        None when the file has no such catalog table (the full catalog then answers, or fails clearly)."""
        import sqlite3

        cat = self.settings.catalog
        path = Path(cat.sqlite_path)
        if not path.is_file():
            raise LookupError_(_no_catalog(cat.sqlite_path))
        try:
            with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
                found = db.execute(
                    "SELECT metadata_location FROM iceberg_tables "
                    "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                    (cat.name, *ident),
                ).fetchone()
        except sqlite3.Error:
            return None
        if found is None or not found[0]:
            raise LookupError_(_missing_table(cat.name, ident))
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(found[0])

    def rows(self, table: str, columns: Sequence[str] | None = None, row_filter: Any = None) -> list[dict]:
        """Rows of ``lineage.<table>`` as dicts (optionally only some columns, filtered by pyiceberg)."""
        return python_rows(self.arrow(table, columns, row_filter))

    def table(self, table: str) -> Any:
        """The pyiceberg table ``lineage.<table>`` at its current metadata."""
        return self.open_table(self.settings.catalog.lineage_namespace, table)

    def open_table(self, namespace: str, table: str) -> Any:
        """The pyiceberg table ``<namespace>.<table>`` (``raw.events`` too) at its current metadata."""
        ident = (namespace, table)
        try:
            loaded = self._embedded_table(ident) if self.settings.catalog.embedded else None
            if loaded is None:
                loaded = self.catalog.load_table(ident)
        except LookupError_:
            raise
        except Exception as exc:
            if type(exc).__name__ in ("NoSuchTableError", "NoSuchNamespaceError"):
                raise LookupError_(_missing_table(self.settings.catalog.name, ident)) from exc
            raise LookupError_(f"cannot read {'.'.join(ident)}: {_first_line(exc)}") from exc
        return loaded

    def scan_table(
        self,
        namespace: str,
        table: str,
        columns: Sequence[str] | None = None,
        row_filter: Any = None,
        as_of: datetime | None = None,
    ) -> Any:
        """Arrow rows of ``<namespace>.<table>``, read from Iceberg whatever this store holds in memory:
        at its snapshot as of ``as_of`` (Iceberg time travel by commit time; empty if it had none yet), or
        its current one. For the tables the read index does not hold (schema history, raw events)."""
        loaded = self.open_table(namespace, table)
        kwargs: dict[str, Any] = {}
        if columns:
            kwargs["selected_fields"] = tuple(columns)
        if row_filter is not None:
            kwargs["row_filter"] = row_filter
        if as_of is not None:
            pinned = loaded.snapshot_as_of_timestamp(round(as_of.timestamp() * 1000), inclusive=True)
            if pinned is None:
                from pyiceberg.io.pyarrow import schema_to_pyarrow

                empty = schema_to_pyarrow(loaded.schema()).empty_table()
                return empty.select(list(columns)) if columns else empty
            kwargs["snapshot_id"] = pinned.snapshot_id
        return loaded.scan(**kwargs).to_arrow()

    def arrow(self, table: str, columns: Sequence[str] | None = None, row_filter: Any = None) -> Any:
        loaded = self.table(table)
        kwargs: dict[str, Any] = {}
        if columns:
            kwargs["selected_fields"] = tuple(columns)
        if row_filter is not None:
            kwargs["row_filter"] = row_filter
        return loaded.scan(**kwargs).to_arrow()

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
        columns = (self._dataset_columns.column(c).to_pylist() for c in _DATASET_KEY)
        return {i: Node(DATASET, ns, n, i) for i, ns, n in zip(*columns, strict=True)}

    def nodes_of(self, dataset_ids: Iterable[str]) -> dict[str, Node]:
        """The dataset nodes of some ids (unknown ids left out), without building :attr:`dataset_nodes` for
        every dataset of the estate when it is not built yet."""
        wanted = set(dataset_ids)
        if not wanted:
            return {}
        if "dataset_nodes" in self.__dict__:
            known = self.dataset_nodes
            return {i: node for i in wanted if (node := known.get(i)) is not None}
        found = _rows_in(self._dataset_columns, "dataset_id", wanted, _DATASET_KEY)
        return {i: Node(DATASET, ns, n, i) for i, ns, n in found}

    @cached_property
    def _alias_columns(self) -> Any:
        return self.arrow("dataset_aliases", ("alias_namespace", "alias_name", "dataset_id", "alias_kind"))

    @cached_property
    def aliases(self) -> list[dict]:
        return list(self._alias_columns.to_pylist())

    @cached_property
    def job_keys(self) -> set[tuple[str, str]]:
        table = self.arrow("jobs", ("job_namespace", "job_name"))
        found = set(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
        if not found and not len(self._dataset_columns):
            raise LookupError_("the lineage tables are empty: nothing has been ingested and built yet")
        return found

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
        for namespace, name, state, run_id in _rows_in(
            table, "job_key", {f"{a}\x00{b}" for a, b in wanted}, columns
        ):
            self._job_states[(namespace, name)] = (state, run_id)
        for key in wanted:
            self._job_states.setdefault(key, (None, None))

    @cached_property
    def _job_state_columns(self) -> Any:
        import pyarrow.compute as pc

        table = self.arrow("job_summary", ("job_namespace", "job_name", "last_run_state", "last_run_id"))
        key = pc.binary_join_element_wise(table.column("job_namespace"), table.column("job_name"), "\x00")
        return table.append_column("job_key", key)

    @cached_property
    def job_summary(self) -> dict[tuple[str, str], dict]:
        return {(r["job_namespace"], r["job_name"]): r for r in self.rows("job_summary", _SUMMARY_COLUMNS)}

    @cached_property
    def _edge_columns(self) -> Any:
        return self.arrow("job_edges", ("job_namespace", "job_name", "dataset_id", "direction", "first_seen"))

    @cached_property
    def column_edge_rows(self) -> list[dict]:
        cols = (*_COLUMN_EDGE_KEY, "transformations", "subtypes", "is_direct", "first_seen")
        return self.rows("column_edges", cols)

    @cached_property
    def job_dependency_rows(self) -> list[dict]:
        """``lineage.job_dependencies`` (empty for a lake built before the table existed)."""
        try:
            return self.rows("job_dependencies")
        except LookupError_ as exc:
            if "does not exist" in str(exc) or "not held" in str(exc):
                return []
            raise

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
    def _names(self) -> dict[str, set[Node]]:
        names: dict[str, set[Node]] = {}

        def add(key: str, node: Node) -> None:
            for variant in {key, key.rstrip("/")}:
                names.setdefault(variant, set()).add(node)

        for node in self.dataset_nodes.values():
            add(display_name(node.namespace, node.name), node)
            add(f"{node.namespace}/{node.name}", node)
        for alias in self.aliases:
            aliased = self.dataset_nodes.get(alias["dataset_id"])
            if aliased is not None:
                add(display_name(alias["alias_namespace"], alias["alias_name"]), aliased)
                add(f"{alias['alias_namespace']}/{alias['alias_name']}", aliased)
        for namespace, name in self.job_keys:
            node = self.job_node(namespace, name)
            add(f"{namespace}/{name}", node)
        return names

    def _exact(self, key: str) -> set[Node]:
        """The nodes one of whose full names is ``key`` (any spelling of :func:`_variants`, with or without a
        trailing slash): what :attr:`_names` answers. Looked up there when it is built (the read API's warm
        store); otherwise computed on the name columns, without building the whole dictionary for one
        question (the CLI: one question per process, where a pass over the columns is cheaper)."""
        spellings = sorted({v for k in _variants(key) for v in (k, k.rstrip("/"))})
        if "_names" in self.__dict__:
            names = self._names
            return {node for spelled in spellings for node in names.get(spelled, ())}
        import pyarrow as pa
        import pyarrow.compute as pc

        wanted = pa.array(spellings, pa.string())
        # A full name ends with the name (``ns/name``, or ``ns://name`` for a name starting with "/"), so
        # only rows whose name, trailing slashes trimmed, is a suffix of a trimmed spelling can match: one
        # pass picks them, and the names are spelled out for those few rows only.
        suffixes = pa.array(sorted({w.rstrip("/")[i:] for w in spellings for i in range(len(w) + 1)}))
        found: set[Node] = set()
        for whole, ns_col, name_col in (
            (self._dataset_columns, "namespace", "name"),
            (self._alias_columns, "alias_namespace", "alias_name"),
        ):
            table = whole.filter(pc.is_in(pc.utf8_rtrim(whole.column(name_col), "/"), value_set=suffixes))
            ns, name = table.column(ns_col), table.column(name_col)
            plain = pc.binary_join_element_wise(ns, name, "/")
            glue = pc.if_else(pc.match_substring(ns, "://"), "", "://")
            shown = pc.if_else(
                pc.starts_with(name, "/"), pc.binary_join_element_wise(ns, glue, name, ""), plain
            )
            hit = None
            for form in (plain, shown):
                for spelled in (form, pc.utf8_rtrim(form, "/")):
                    match = pc.is_in(spelled, value_set=wanted)
                    hit = match if hit is None else pc.or_(hit, match)
            found.update(self.nodes_of(table.filter(hit).column("dataset_id").to_pylist()).values())
        keys = set(wanted.to_pylist())
        for namespace, name in self.job_keys:
            text = f"{namespace}/{name}"
            if text in keys or text.rstrip("/") in keys:
                found.add(self.job_node(namespace, name))
        return found

    @cached_property
    def _short_names(self) -> dict[str, set[Node]]:
        short: dict[str, set[Node]] = {}
        for node in self.dataset_nodes.values():
            short.setdefault(node.name, set()).add(node)
        for alias in self.aliases:
            aliased = self.dataset_nodes.get(alias["dataset_id"])
            if aliased is not None:
                short.setdefault(alias["alias_name"], set()).add(aliased)
        for namespace, name in self.job_keys:
            short.setdefault(name, set()).add(self.job_node(namespace, name))
        return short

    @cached_property
    def _tail_names(self) -> dict[str, set[Node]]:
        tails: dict[str, set[Node]] = {}
        for key, nodes in self._short_names.items():
            tail = re.split(r"[/.]", key.rstrip("/"))[-1]
            if tail and tail != key:
                tails.setdefault(tail, set()).update(n for n in nodes if n.kind == DATASET)
        return tails

    def resolve(self, text: str) -> Node:
        """A job or (canonical) dataset from any of its names.

        Accepts ``job:ns/name`` / ``dataset:ns/name``, a dataset URI under any alias (``s3a://b/t/``,
        ``hive://metastore:9083/db.table``), ``namespace/name`` of a job, or a bare name when unique.
        """
        kind = None
        key = text.strip()
        for prefix in (JOB, DATASET):
            if key.startswith(prefix + ":") and not key.startswith(prefix + "://"):
                kind, key = prefix, key[len(prefix) + 1 :]
        candidates = self._exact(key)
        if not candidates:
            candidates = set(self._short_names.get(key, set()))
        if not candidates:  # last segment of a path or a dotted table name: orders, supplier_stats
            candidates = set(self._tail_names.get(key, set()))
        if kind:
            candidates = {c for c in candidates if c.kind == kind}
        if len(candidates) == 1:
            return next(iter(candidates))
        if candidates:
            listed = ", ".join(sorted(c.id for c in candidates))
            raise LookupError_(f"{text!r} is ambiguous: {listed}; give a full name or job:/dataset:")
        close = difflib.get_close_matches(key, list(self._names), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownNode(f"unknown node {text!r}{hint}", close)

    def resolve_field(self, text: str) -> tuple[Node, str | None]:
        """``DATASET`` or ``DATASET.FIELD`` (the dataset name itself may contain dots)."""
        try:
            return self.resolve(text), None
        except LookupError_ as whole:
            head, dot, field_name = text.rpartition(".")
            if not dot or not head:
                raise
            try:
                node = self.resolve(head)
            except LookupError_:
                raise whole from None
            if node.kind != DATASET:
                raise LookupError_(f"{head!r} is a job; a field needs a dataset") from None
            known = {f["name"] for f in self.datasets[node.dataset_id or ""].get("schema_fields") or []}
            for edge in self.column_edge_rows:
                for side in ("source", "target"):
                    if edge[f"{side}_dataset_id"] == node.dataset_id:
                        known.add(edge[f"{side}_field"])
            if field_name not in known:
                close = difflib.get_close_matches(field_name, sorted(known), n=3, cutoff=0.6)
                message = f"dataset {node.label} has no field {field_name!r}"
                raise UnknownNode(message, [f"{node.label}.{c}" for c in close]) from None
            return node, field_name

    # -- traversal ---------------------------------------------------------------------------------------
    @cached_property
    def _walk_tables(self) -> dict[str, dict[tuple[str, str], Any]]:
        """granularity -> :meth:`_edges_by_hop` without ``as_of`` (the same for every walk of this store)."""
        return {}

    @cached_property
    def _adjacency(self) -> dict[str, dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]]]:
        """granularity -> (walk, from kind) -> key -> the edges leaving it, once :meth:`index_walks` ran."""
        return {}

    def index_walks(self, granularity: str = GRANULARITY_JOB) -> None:
        """Adjacency lists of the edges, for the walks without ``as_of`` of a long-lived store.

        Without them each hop of a walk is a pass over every edge (one vectorised filter: right for the CLI,
        which walks once per process); with them a hop costs what it reaches. The read API builds them
        when it loads a build (:meth:`lineage.serve.index.IndexedStore.warm`).
        """
        lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] = {}
        for side, table in self._edges_by_hop(None, granularity).items():
            key = "dataset_id" if side[1] == DATASET else "job_key"
            found: dict[str, list[tuple[str, str, str, str]]] = {}
            columns = (key, "dataset_id", "job_namespace", "job_name", "direction")
            for row in zip(*(python_values(table.column(c)) for c in columns), strict=True):
                found.setdefault(row[0], []).append(row[1:])
            lists[side] = found
        self._adjacency[granularity] = lists

    def _edges_by_hop(
        self, as_of: datetime | None, granularity: str = GRANULARITY_JOB
    ) -> dict[tuple[str, str], Any]:
        """``job_edges`` split for walking: (walk, from kind) -> the Arrow rows that step leaves by.

        Only edges first seen by ``as_of`` and only edges to datasets of the ``datasets`` table. Upstream a
        dataset is left by its producers' ``output`` edges and a job by its ``input`` edges; downstream the
        other way round. Without ``as_of`` the split is kept for the next walk of this store.
        """
        if as_of is None:
            if granularity not in self._walk_tables:
                self._walk_tables[granularity] = self._split_edges(None, granularity)
            return self._walk_tables[granularity]
        return self._split_edges(as_of, granularity)

    def _split_edges(self, as_of: datetime | None, granularity: str) -> dict[tuple[str, str], Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        table = self._edge_columns
        if as_of is not None:
            seen = table.column("first_seen")
            limit = pa.scalar(as_of, type=seen.type)
            table = table.filter(pc.or_kleene(pc.is_null(seen), pc.less_equal(seen, limit)))
        known = pc.is_in(table.column("dataset_id"), value_set=self._dataset_columns.column("dataset_id"))
        table = table.filter(known)
        if granularity == GRANULARITY_PARENT:
            # Every child job's edges become its parent's: edges of several children merge into one.
            pairs = [
                self.collapse(job, granularity)
                for job in zip(
                    table.column("job_namespace").to_pylist(),
                    table.column("job_name").to_pylist(),
                    strict=True,
                )
            ]
            for i, column in enumerate(("job_namespace", "job_name")):
                values = pa.array([p[i] for p in pairs], pa.string())
                table = table.set_column(table.schema.get_field_index(column), column, values)
        table = table.append_column(
            "job_key",
            pc.binary_join_element_wise(table.column("job_namespace"), table.column("job_name"), "\x00"),
        )
        inputs = table.filter(pc.equal(table.column("direction"), "input"))
        outputs = table.filter(pc.equal(table.column("direction"), "output"))
        return {
            (UPSTREAM, DATASET): outputs,
            (UPSTREAM, JOB): inputs,
            (DOWNSTREAM, DATASET): inputs,
            (DOWNSTREAM, JOB): outputs,
        }

    def traverse(
        self,
        root: Node,
        direction: str,
        depth: int | None,
        *,
        as_of: datetime | None = None,
        columns: bool = False,
        field_name: str | None = None,
        via: str = VIA_DATASETS,
        granularity: str = GRANULARITY_JOB,
    ) -> Traversal:
        """Breadth-first walk from ``root`` (``upstream``, ``downstream``, ``both``) up to ``depth`` hops.

        ``via``: ``datasets`` follows job -> dataset -> job edges (data flow), ``dependencies`` follows
        job -> job dependencies (control flow: declared, Airflow task order, parent -> child), ``both``
        either. ``granularity`` ``parent`` collapses every job into its parent job (Spark application,
        Airflow DAG) before walking, so the edges of its children merge; a child job as root becomes its
        parent.
        One hop at a time over Arrow columns: the edges leaving the whole frontier are found by one
        vectorised filter, and only the nodes reached become Python objects.
        """
        if root.kind == JOB and granularity == GRANULARITY_PARENT:
            root = self.job_node(*self.collapse((root.namespace, root.name), granularity))
        result = Traversal(root, direction, depth)
        walks = [UPSTREAM, DOWNSTREAM] if direction == BOTH else [direction]
        by_hop = self._edges_by_hop(as_of, granularity) if via != VIA_DEPENDENCIES else None
        lists = self._adjacency.get(granularity) if as_of is None and by_hop is not None else None
        result.hops[root] = 0
        reached_ids: set[str] = set()
        found: list[
            tuple[dict[str, int], dict[tuple[str, str], int], set[tuple[str, tuple[str, str], str]]]
        ] = []
        for walk in walks:
            steps = self._dependency_steps(walk, granularity) if via != VIA_DATASETS else None
            datasets, jobs, edges = self._walk(by_hop, lists, walk, root, depth, steps, result)
            reached_ids.update(datasets)
            found.append((datasets, jobs, edges))
        nodes = self.nodes_of(reached_ids)
        hops, add_edge = result.hops, result.edges.add
        for datasets, jobs, edges in found:
            for ds_id, hop in datasets.items():
                node = nodes.get(ds_id) or (root if ds_id == root.dataset_id else None)
                if node is not None and hops.get(node, hop) >= hop:  # the fewest hops of both walks
                    hops[node] = hop
            job_nodes = {key: self.job_node(*key) for key in jobs}  # every edge's job was reached
            for key, hop in jobs.items():
                node = job_nodes[key]
                if hops.get(node, hop) >= hop:
                    hops[node] = hop
            for ds_id, key, kind in edges:
                dataset = nodes.get(ds_id)
                if dataset is not None:
                    add_edge((dataset, job_nodes.get(key) or self.job_node(*key), kind))
        if columns or field_name:
            self._walk_columns(result, walks, as_of, field_name)
        return result

    def _walk(
        self,
        by_hop: dict[tuple[str, str], Any] | None,
        lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] | None,
        walk: str,
        root: Node,
        depth: int | None,
        steps: dict[tuple[str, str], set[tuple[tuple[str, str], str]]] | None,
        result: Traversal,
    ) -> tuple[dict[str, int], dict[tuple[str, str], int], set[tuple[str, tuple[str, str], str]]]:
        """(dataset id -> hops, job -> hops, edges as (dataset id, job, input|output)) of one direction;
        job-to-job links followed (``steps``) go to ``result.job_links``."""
        datasets: dict[str, int] = {}
        jobs: dict[tuple[str, str], int] = {}
        edges: set[tuple[str, tuple[str, str], str]] = set()
        if root.kind == DATASET:
            datasets[root.dataset_id or ""] = 0
            frontier_ds, frontier_jobs = {root.dataset_id or ""}, set()
        else:
            jobs[(root.namespace, root.name)] = 0
            frontier_ds, frontier_jobs = set(), {(root.namespace, root.name)}
        hop = 0
        while (frontier_ds or frontier_jobs) and (depth is None or hop < depth):
            next_ds: set[str] = set()
            next_jobs: set[tuple[str, str]] = set()
            if frontier_ds and by_hop is not None:
                for ds_id, namespace, name, kind in _leaving(
                    by_hop, lists, (walk, DATASET), "dataset_id", frontier_ds
                ):
                    edges.add((ds_id, (namespace, name), kind))
                    if (namespace, name) not in jobs:
                        jobs[(namespace, name)] = hop + 1
                        next_jobs.add((namespace, name))
            if frontier_jobs and steps is not None:
                for job in frontier_jobs:
                    for other, source in steps.get(job, ()):
                        up, down = (other, job) if walk == UPSTREAM else (job, other)
                        result.job_links.add((self.job_node(*up), self.job_node(*down), source))
                        if other not in jobs:
                            jobs[other] = hop + 1
                            next_jobs.add(other)
            if frontier_jobs and by_hop is not None:
                keys = {f"{ns}\x00{n}" for ns, n in frontier_jobs}
                for ds_id, namespace, name, kind in _leaving(by_hop, lists, (walk, JOB), "job_key", keys):
                    edges.add((ds_id, (namespace, name), kind))
                    if ds_id not in datasets:
                        datasets[ds_id] = hop + 1
                        next_ds.add(ds_id)
            frontier_ds, frontier_jobs = next_ds, next_jobs
            hop += 1
        return datasets, jobs, edges

    def _walk_columns(
        self,
        result: Traversal,
        walks: Sequence[str],
        as_of: datetime | None,
        field_name: str | None,
    ) -> None:
        root = result.root
        max_jobs = None if result.depth is None else (result.depth + 1) // 2
        forward: dict[tuple[str, str], list[dict]] = {}
        backward: dict[tuple[str, str], list[dict]] = {}
        for edge in self.column_edge_rows:
            if as_of is not None and edge["first_seen"] is not None and edge["first_seen"] > as_of:
                continue
            forward.setdefault((edge["source_dataset_id"], edge["source_field"]), []).append(edge)
            backward.setdefault((edge["target_dataset_id"], edge["target_field"]), []).append(edge)
        if root.kind == DATASET:
            starts = self._fields_of(root.dataset_id or "", forward, backward, field_name)
        else:  # a job: the fields it writes (downstream) or reads (upstream)
            starts = set()
            for edge in self.column_edge_rows:
                if (edge["job_namespace"], edge["job_name"]) == (root.namespace, root.name):
                    starts.add((edge["target_dataset_id"], edge["target_field"]))
                    starts.add((edge["source_dataset_id"], edge["source_field"]))
        followed: set[tuple] = set()
        for walk in walks:
            index, target_key = (
                (backward, ("source_dataset_id", "source_field"))
                if walk == UPSTREAM
                else (forward, ("target_dataset_id", "target_field"))
            )
            seen = {start: 0 for start in starts}
            queue = deque(starts)
            while queue:
                current = queue.popleft()
                hop = seen[current]
                if max_jobs is not None and hop >= max_jobs:
                    continue
                for edge in index.get(current, ()):
                    nxt = (edge[target_key[0]], edge[target_key[1]] or WHOLE_DATASET)
                    key = tuple(edge[k] for k in _COLUMN_EDGE_KEY)
                    if key not in followed:
                        followed.add(key)
                        result.column_edges.append(edge)
                    if nxt not in seen:
                        seen[nxt] = hop + 1
                        queue.append(nxt)
            for (ds_id, name), hop in seen.items():
                node = self.dataset_nodes.get(ds_id)
                if node is not None and hop > 0:
                    key_field = Field(node, name)
                    result.columns[key_field] = min(hop, result.columns.get(key_field, hop))

    def _fields_of(
        self, ds_id: str, forward: dict, backward: dict, field_name: str | None
    ) -> set[tuple[str, str]]:
        if field_name is not None:
            return {(ds_id, field_name)}
        names = {f["name"] for f in self.datasets.get(ds_id, {}).get("schema_fields") or []}
        names |= {name for d, name in list(forward) + list(backward) if d == ds_id}
        return {(ds_id, name) for name in names}

    # -- runs --------------------------------------------------------------------------------------------
    def runs(
        self,
        *,
        job: str | None = None,
        states: Iterable[str] = (),
        since: datetime | None = None,
        limit: int | None = None,
        tags: Sequence[Tag] = (),
    ) -> list[dict]:
        ex = _expressions()
        expr: Any = ex.AlwaysTrue()
        if job:
            node = self.resolve(job)
            if node.kind != JOB:
                raise LookupError_(f"{job!r} is a dataset, not a job")
            same_job = ex.And(ex.EqualTo("job_namespace", node.namespace), ex.EqualTo("job_name", node.name))
            expr = ex.And(expr, same_job)
        wanted = list(states)
        if wanted:
            expr = ex.And(expr, ex.In("inferred_state", wanted))
        if since is not None:
            expr = ex.And(expr, ex.GreaterThanOrEqual("last_event_at", since.isoformat()))
        rows = self.rows("runs", row_filter=expr)
        if tags:
            # A run carries a tag when its own tags facet or its job's has it.
            rows = [
                r
                for r in rows
                if has_tag(r.get("tags"), tags)
                or has_tag(self.jobs.get((r["job_namespace"], r["job_name"]), {}).get("tags"), tags)
            ]
        rows.sort(key=lambda r: r["started_at"] or r["last_event_at"] or _EPOCH, reverse=True)
        return rows[:limit] if limit else rows

    @cached_property
    def dataset_tags(self) -> dict[str, list[dict]]:
        return {
            r["dataset_id"]: r["tags"] for r in self.rows("datasets", ("dataset_id", "tags")) if r["tags"]
        }

    def keep_tagged(self, walk: Traversal, tags: Sequence[Tag]) -> Traversal:
        """The walk with only the nodes carrying one of ``tags`` (the root always stays) and their edges."""
        if not tags:
            return walk

        def keep(node: Node) -> bool:
            if node == walk.root:
                return True
            if node.kind == JOB:
                return has_tag(self.jobs.get((node.namespace, node.name), {}).get("tags"), tags)
            return has_tag(self.dataset_tags.get(node.dataset_id or ""), tags)

        kept = {n: h for n, h in walk.hops.items() if keep(n)}
        walk.hops = kept
        walk.edges = {e for e in walk.edges if e[0] in kept and e[1] in kept}
        walk.job_links = {e for e in walk.job_links if e[0] in kept and e[1] in kept}
        return walk

    def run(self, run_id: str) -> dict:

        text = run_id.strip().lower()
        if not re.fullmatch(r"[0-9a-f-]{4,36}", text):
            raise LookupError_(f"not a run id: {run_id!r} (expected a UUID or a unique prefix of one)")
        ex = _expressions()
        match = ex.EqualTo("run_id", text) if len(text) == 36 else ex.StartsWith("run_id", text)
        rows = self.rows("runs", row_filter=match)
        if not rows:
            raise UnknownNode(f"unknown run {run_id!r}")
        if len(rows) > 1:
            raise LookupError_(f"run id prefix {run_id!r} matches {len(rows)} runs; give more characters")
        return rows[0]

    def children(self, run_id: str) -> list[dict]:
        ex = _expressions()
        rows = self.rows("runs", row_filter=ex.EqualTo("parent_run_id", run_id))
        return sorted(rows, key=lambda r: r["started_at"] or r["last_event_at"] or _EPOCH)

    def run_datasets(self, run_id: str) -> list[dict]:
        ex = _expressions()
        rows = self.rows("run_io", row_filter=ex.EqualTo("run_id", run_id))
        for row in rows:
            node = self.dataset_nodes.get(row["dataset_id"])
            row["dataset"] = node.label if node else row["dataset_id"]
        return sorted(rows, key=lambda r: (r["direction"], r["dataset"]))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Tag = tuple[str, str | None]  # key, and the value it must have (None: any value)


def parse_tag(text: str) -> Tag:
    """``KEY`` or ``KEY=VALUE`` (keys compare case-insensitively, values exactly)."""
    key, sep, value = text.partition("=")
    if not key.strip():
        raise LookupError_(f"not a tag: {text!r} (expected KEY or KEY=VALUE)")
    return key.strip(), value if sep else None


def has_tag(carried: Sequence[dict] | None, wanted: Sequence[Tag]) -> bool:
    """Whether ``carried`` (a tags facet's ``tags``: key, value, source) holds one of ``wanted``."""
    for tag in carried or ():
        key = str(tag.get("key") or "").lower()
        for want_key, want_value in wanted:
            if key == want_key.lower() and (want_value is None or tag.get("value") == want_value):
                return True
    return False


_COLUMN_EDGE_KEY = (
    "source_dataset_id",
    "source_field",
    "target_dataset_id",
    "target_field",
    "job_namespace",
    "job_name",
)


_DATASET_KEY = ("dataset_id", "namespace", "name")
_SUMMARY_COLUMNS = (
    "job_namespace",
    "job_name",
    "last_run_state",
    "last_run_id",
    "last_run_reported_state",
    "run_count",
    "lost_runs",
    "failed_runs",
)


def _rows_in(table: Any, key: str, values: set[str], columns: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    """The ``columns`` of the rows of an Arrow table whose string column ``key`` is in ``values``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = table.filter(pc.is_in(table.column(key), value_set=pa.array(sorted(values), pa.string())))
    return zip(*(python_values(found.column(c)) for c in columns), strict=True)


def python_values(column: Any) -> list[Any]:
    """An Arrow column as Python values; timestamps beyond Python's range are clamped to it.

    The lake can hold times Python's ``datetime`` cannot (year 10000 from an offset like
    ``9999-12-31T23:59:59-01:00``, landed before ingestion bounded eventTime); such a value reads as
    ``datetime.max`` (or ``datetime.min``) instead of failing the whole command.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    # Nanosecond timestamps (years 1677..2262) always fit; Iceberg's timestamps are microseconds.
    if pa.types.is_timestamp(kind) and kind.unit != "ns":
        micros = pa.timestamp("us", tz=kind.tz)
        ints = column.cast(micros).cast(pa.int64())
        clamped = pc.min_element_wise(
            pc.max_element_wise(ints, _PY_MIN_MICROS, skip_nulls=False), _PY_MAX_MICROS, skip_nulls=False
        )
        column = clamped.cast(micros)
    return column.to_pylist()


def python_rows(table: Any) -> list[dict[str, Any]]:
    """An Arrow table as dicts, top-level timestamps clamped as in :func:`python_values`."""
    values = {name: python_values(table.column(name)) for name in table.column_names}
    return (
        [dict(zip(values, row, strict=True)) for row in zip(*values.values(), strict=True)] if values else []
    )


# datetime.min / datetime.max as microseconds since the epoch (UTC).
_PY_MIN_MICROS = -62135596800 * 1_000_000
_PY_MAX_MICROS = 253402300799 * 1_000_000 + 999_999


def _leaving(
    by_hop: dict[tuple[str, str], Any],
    lists: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str]]]] | None,
    side: tuple[str, str],
    key: str,
    values: set[str],
) -> Iterable[tuple[Any, ...]]:
    """(dataset id, job namespace, job name, direction) of the edges of ``side`` whose ``key`` is in
    ``values``: from the adjacency lists when built, else one filter of the side's Arrow rows."""
    if lists is not None:
        leaving = lists[side]
        return [edge for value in values for edge in leaving.get(value, ())]
    return _rows_in(by_hop[side], key, values, ("dataset_id", "job_namespace", "job_name", "direction"))


def _variants(key: str) -> list[str]:
    """The spellings a user may type for the same dataset (Hadoop s3a/s3n schemes, trailing slash)."""
    out = [key]
    for scheme in ("s3a://", "s3n://"):
        if key.startswith(scheme):
            out.append("s3://" + key[len(scheme) :])
    return out


def _expressions() -> Any:
    """pyiceberg's row filter expressions (imported on use; typed loosely: their stubs are pydantic)."""
    import pyiceberg.expressions

    return pyiceberg.expressions


def _no_catalog(path: Path) -> str:
    return f"no catalog at {path}: run the ingestion and the build first (make demo)"


def _missing_table(catalog: str, ident: tuple[str, str]) -> str:
    table = f"{catalog}.{'.'.join(ident)}"
    return f"{table} does not exist: run the build first (jobs/build_lineage.py or make build)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
