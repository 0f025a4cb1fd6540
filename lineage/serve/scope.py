"""What a key limited to namespaces (:class:`~lineage.serve.auth.Scope`) may see and write.

Reads: a scoped key is answered from a :class:`ScopedStore`, the index with every row naming a namespace
out of scope taken out (datasets, their aliases, jobs, runs, edges, column edges, dependencies) and the
references to such names (a job's parent job, a run's parent and root) nulled. Every answer is then worked
out by the same code as for an unscoped key, so lists and searches filter, a walk stops where the visible
graph ends, and a hidden name answers 404 exactly as an absent one (its suggestions come from the visible
names only). A walk also counts the nodes it withheld (:meth:`ScopedStore.traverse`). The raw events
(Marquez's event list, run facets, statistics) are read from Iceberg: :func:`event_visible` picks them
and :func:`prune` takes out every object of an event naming a hidden namespace.

Writes: :func:`out_of_scope` says which namespaces of an event a key may not write.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from lineage.query.errors import LookupError_
from lineage.query.nodes import GRANULARITY_JOB, VIA_DATASETS, Node, Traversal
from lineage.serve.auth import Scope
from lineage.serve.index import IndexedStore


def _allowed(column: Any, scope: Scope) -> Any:
    """A boolean mask of the rows whose namespace ``column`` is in ``scope`` (null: not allowed). The
    globs run once per distinct namespace, not once per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    distinct = [v for v in pc.unique(column).to_pylist() if scope.allows(v)]
    return pc.fill_null(pc.is_in(column, value_set=pa.array(distinct, pa.string()).cast(column.type)), False)


def _among(column: Any, values: Any) -> Any:
    import pyarrow.compute as pc

    return pc.fill_null(pc.is_in(column, value_set=values), False)


def _null_unless(table: Any, keep: Any, columns: tuple[str, ...]) -> Any:
    """``table`` with ``columns`` set to null in the rows where ``keep`` is false."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in columns:
        if name in table.column_names:
            column = table.column(name)
            cleared = pc.if_else(keep, column, pa.scalar(None, column.type))
            table = table.set_column(table.schema.get_field_index(name), name, cleared)
    return table


def _visible_tags(tags: Any, ids: Any, scope: Scope) -> Any:
    """The mask of the column tags a scoped key sees: the column, the origin and every step of the path (its
    job and the column it reached) visible; a tag that came through a hidden name is not shown at all."""
    import pyarrow as pa
    import pyarrow.compute as pc

    paths = tags.column("path").combine_chunks()
    steps = pc.list_flatten(paths)
    hidden = pc.invert(
        pc.and_(_among(steps.field("dataset_id"), ids), _allowed(steps.field("job_namespace"), scope))
    )
    rows_hidden = pc.unique(pc.filter(pc.list_parent_indices(paths), hidden))
    clear = pc.invert(
        pc.is_in(pa.array(range(len(tags)), pa.int64()), value_set=rows_hidden.cast(pa.int64()))
    )
    return pc.and_(
        pc.and_(_among(tags.column("dataset_id"), ids), _among(tags.column("origin_dataset_id"), ids)), clear
    )


def scoped_tables(tables: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """The index's Arrow tables as a key limited to ``scope`` may see them.

    A dataset is visible when its (canonical) namespace is in scope, an alias when its own namespace is
    too, a job by its namespace; an edge, column edge, run input/output or dependency when every end is
    visible (a quality result: its run and dataset; a column tag: its column, origin and path); a run when its
    job is. A parent or root job out of scope is nulled (with its run id).
    """
    import pyarrow.compute as pc

    out = dict(tables)
    datasets = tables["datasets"].filter(_allowed(tables["datasets"].column("namespace"), scope))
    out["datasets"] = datasets
    ids = datasets.column("dataset_id").combine_chunks()

    def keep(name: str, mask: Any) -> None:
        out[name] = tables[name].filter(mask)

    aliases = tables["dataset_aliases"]
    keep(
        "dataset_aliases",
        pc.and_(
            _among(aliases.column("dataset_id"), ids), _allowed(aliases.column("alias_namespace"), scope)
        ),
    )
    jobs = tables["jobs"].filter(_allowed(tables["jobs"].column("job_namespace"), scope))
    out["jobs"] = _hide_references(jobs, scope, ("parent",))
    keep("job_summary", _allowed(tables["job_summary"].column("job_namespace"), scope))
    edges = tables["job_edges"]
    keep(
        "job_edges",
        pc.and_(_allowed(edges.column("job_namespace"), scope), _among(edges.column("dataset_id"), ids)),
    )
    columns = tables["column_edges"]
    keep(
        "column_edges",
        pc.and_(
            _allowed(columns.column("job_namespace"), scope),
            pc.and_(
                _among(columns.column("source_dataset_id"), ids),
                _among(columns.column("target_dataset_id"), ids),
            ),
        ),
    )
    runs = tables["runs"].filter(_allowed(tables["runs"].column("job_namespace"), scope))
    out["runs"] = _hide_references(runs, scope, ("parent", "root"))
    run_io = tables["run_io"]
    visible_run = _among(run_io.column("run_id"), runs.column("run_id").combine_chunks())
    keep("run_io", pc.and_(visible_run, _among(run_io.column("dataset_id"), ids)))
    if "quality_results" in tables:
        quality = tables["quality_results"]
        checked_by = _among(quality.column("run_id"), runs.column("run_id").combine_chunks())
        keep("quality_results", pc.and_(checked_by, _among(quality.column("dataset_id"), ids)))
    if "column_tags" in tables:
        keep("column_tags", _visible_tags(tables["column_tags"], ids, scope))
    if "job_dependencies" in tables:
        deps = tables["job_dependencies"]
        keep(
            "job_dependencies",
            pc.and_(
                _allowed(deps.column("upstream_job_namespace"), scope),
                _allowed(deps.column("downstream_job_namespace"), scope),
            ),
        )
    return out


# Free text of the index's rows: where a visible job's producer may have written a hidden name.
TEXT_COLUMNS = {
    "jobs": ("description", "source_code_url", "source_code_repo_url", "source_code_path"),
    "runs": ("error_message", "error_stack_trace"),
}


def mask_text_columns(tables: dict[str, Any], mask: NameMask) -> dict[str, Any]:
    """``tables`` with the hidden names in their free-text columns masked (:class:`NameMask`)."""
    import pyarrow as pa

    if not mask:
        return tables
    out = dict(tables)
    for name, columns in TEXT_COLUMNS.items():
        table = out.get(name)
        for column in columns:
            if table is None or column not in table.column_names:
                continue
            values = table.column(column).to_pylist()
            masked = pa.array([v if v is None else mask(v) for v in values], table.schema.field(column).type)
            table = table.set_column(table.schema.get_field_index(column), column, masked)
        if table is not None:
            out[name] = table
    return out


def _hide_references(table: Any, scope: Scope, sides: tuple[str, ...]) -> Any:
    """``<side>_job_namespace``, ``<side>_job_name`` (and ``<side>_run_id``) nulled where that job is out of
    scope (a table without such columns is kept as it is)."""
    for side in sides:
        if f"{side}_job_namespace" in table.column_names:
            visible = _allowed(table.column(f"{side}_job_namespace"), scope)
            table = _null_unless(
                table, visible, (f"{side}_run_id", f"{side}_job_namespace", f"{side}_job_name")
            )
    return table


class ScopedStore(IndexedStore):
    """The index as a scoped key sees it (:func:`scoped_tables`); ``full`` is the whole index.

    Within :meth:`counting`, every walk is also made on the whole index, and the nodes it reaches that
    this walk does not (hidden nodes, and visible ones reached only through hidden ones) are counted.
    """

    def __init__(self, full: IndexedStore, scope: Scope) -> None:
        super().__init__(full.settings, scoped_tables(full._tables, scope), full._schemas)
        # weakly: the views are cached by the whole index (a WeakKeyDictionary), which must stay collectable
        self._full = weakref.ref(full)
        self.scope = scope
        self.build = full.build
        self._counters = threading.local()
        self.mask = NameMask(hidden_terms(full, self))
        self._tables = mask_text_columns(self._tables, self.mask)

    @property
    def full(self) -> IndexedStore:
        """The whole index (alive while a request holds it, as every request using this view does)."""
        whole = self._full()
        if whole is None:  # pragma: no cover - a view is only reached through its index
            raise LookupError_("the read index this view was made from is gone")
        return whole

    @contextmanager
    def counting(self) -> Iterator[list[int]]:
        """The withheld nodes of each walk made in this thread meanwhile (one answer's work)."""
        counts: list[int] = []
        self._counters.current = counts
        try:
            yield counts
        finally:
            self._counters.current = None

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
        walk = super().traverse(
            root,
            direction,
            depth,
            as_of=as_of,
            columns=columns,
            field_name=field_name,
            via=via,
            granularity=granularity,
        )
        counts = getattr(self._counters, "current", None)
        if counts is not None:
            whole = self.full.traverse(root, direction, depth, as_of=as_of, via=via, granularity=granularity)
            counts.append(len(whole.hops.keys() - walk.hops.keys()))
        return walk


_SCOPED: weakref.WeakKeyDictionary[IndexedStore, dict[Scope, ScopedStore]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def scoped_store(store: IndexedStore, scope: Scope) -> IndexedStore:
    """``store`` as a key of ``scope`` sees it: the store itself for an unlimited scope, else its scoped
    view, made once per loaded index and scope (a newer build replaces the index, and its views with it)."""
    if scope.unlimited:
        return store
    with _LOCK:  # one view made at a time: concurrent first requests of one scope wait for it
        views = _SCOPED.setdefault(store, {})
        if scope not in views:
            views[scope] = ScopedStore(store, scope)
            views[scope].warm()
        return views[scope]


def scope_of(store: IndexedStore) -> Scope | None:
    """The scope a store answers for (None: everything)."""
    return store.scope if isinstance(store, ScopedStore) else None


def event_visible(scope: Scope | None, job_namespace: str | None, dataset_namespace: str | None) -> bool:
    """Whether a raw event is listed to a key of ``scope``: a run or job event by its job's namespace, a
    dataset event by its dataset's."""
    if scope is None:
        return True
    return scope.allows(job_namespace if job_namespace is not None else dataset_namespace)


# A word of free text (an error message, a description, a string of an event) and the places inside a word
# where a name may begin or end.
_WORD = re.compile(r"[^\s'\"`,;()\[\]{}<>=|]+")
_INNER = re.compile(r"[./:@#$]")
HIDDEN_MARK = "***HIDDEN***"


class NameMask:
    """Replaces the hidden names a text holds as words or parts of words (cut where ``.``, ``/``, ``:`` ...
    stand) by ``***HIDDEN***``: hidden namespaces (and any name under one), and the names of hidden jobs,
    datasets and aliases that no visible job or dataset also has. A hidden name run together with other
    letters (``mydefault.ordersx``) is not found. Linear in the text; a few lookups per word."""

    def __init__(self, terms: set[str]) -> None:
        self.terms = frozenset(t for t in terms if t)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __call__(self, text: str) -> str:
        return _WORD.sub(self._word, text) if self.terms else text

    def _word(self, match: re.Match[str]) -> str:
        word = match.group(0)
        if word in self.terms:
            return HIDDEN_MARK
        cuts = [m.start() for m in _INNER.finditer(word)]
        if not cuts:
            return word
        starts = [0, *(c + 1 for c in cuts)]
        ends = [*cuts, len(word)]
        spans = []
        for start in starts:
            for end in reversed(ends):  # the longest name from here first
                if end > start and word[start:end] in self.terms:
                    spans.append((start, end))
                    break
        if not spans:
            return word
        out, at = [], 0
        for start, end in spans:
            if start >= at:
                out += [word[at:start], HIDDEN_MARK]
                at = end
        return "".join([*out, word[at:]])


def hidden_terms(full: IndexedStore, view: IndexedStore) -> set[str]:
    """What :class:`NameMask` hides for a view of ``full``: the names ``full`` holds and ``view`` does not."""
    seen_all: set[str] = set()
    seen: set[str] = set()
    for store, names in ((full, seen_all), (view, seen)):
        for node in store.dataset_nodes.values():
            names.update((node.namespace, node.name))
        for alias in store.aliases:
            names.update((alias["alias_namespace"], alias["alias_name"]))
        for namespace, name in store.job_keys:
            names.update((namespace, name))
    return seen_all - seen


def visible_json(store: IndexedStore, value: Any) -> Any:
    """``value`` (a decoded event, facets) as the store's key may see it: for a scoped key, without the
    objects naming a hidden namespace (:func:`prune`) and with hidden names in its strings masked."""
    if not isinstance(store, ScopedStore):
        return value
    return _mask_strings(prune(value, store.scope), store.mask)


def _mask_strings(value: Any, mask: NameMask) -> Any:
    if not mask:
        return value
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: _mask_strings(v, mask) for k, v in value.items()}  # keys are a facet's schema
    if isinstance(value, list):
        return [_mask_strings(v, mask) for v in value]
    return value


def prune(value: Any, scope: Scope | None) -> Any:
    """``value`` (a decoded event, facets) without any object whose ``namespace`` is out of scope: a hidden
    input or output, a parent job, a symlink, a column lineage input field ... An object naming a hidden
    namespace is left out of its list, or its key left out of its object."""
    if scope is None:
        return value
    if isinstance(value, dict):
        return {k: prune(v, scope) for k, v in value.items() if not _hidden(v, scope)}
    if isinstance(value, list):
        return [prune(v, scope) for v in value if not _hidden(v, scope)]
    return value


def _hidden(value: Any, scope: Scope) -> bool:
    namespace = value.get("namespace") if isinstance(value, dict) else None
    return isinstance(namespace, str) and not scope.allows(namespace)


def event_namespaces(document: dict[str, Any] | None) -> tuple[str | None, list[str]]:
    """(the namespace an event is written under: its job's, or a dataset event's dataset's; every
    namespace it names: that one and its inputs' and outputs')."""
    if not isinstance(document, dict):
        return None, []
    named: list[str] = []
    owner = None
    for key in ("job", "dataset"):
        part = document.get(key)
        if isinstance(part, dict) and isinstance(part.get("namespace"), str):
            named.append(part["namespace"])
            owner = owner or part["namespace"]
    for key in ("inputs", "outputs"):
        for item in document.get(key) or ():
            if isinstance(item, dict) and isinstance(item.get("namespace"), str):
                named.append(item["namespace"])
    return owner, named


def out_of_scope(document: dict[str, Any] | None, scope: Scope) -> str | None:
    """Why a key of ``scope`` may not write this event (None: it may): its job (or dataset) or one of its
    datasets is in a namespace out of scope, or it names no job or dataset namespace to check."""
    if scope.unlimited:
        return None
    owner, named = event_namespaces(document)
    if owner is None:
        return "the event names no job or dataset namespace, so its scope cannot be checked"
    outside = sorted({n for n in named if not scope.allows(n)})
    if outside:
        return f"namespace{'s' if len(outside) > 1 else ''} outside this key's scope: {', '.join(outside)}"
    return None
