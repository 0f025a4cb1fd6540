"""Which node a user means: any name or alias of a dataset, a job's ``namespace/name``, a unique short
name, with suggestions for a name that matches nothing."""

from __future__ import annotations

import difflib
import re
from functools import cached_property

from lineage.query.errors import LookupError_, UnknownNode
from lineage.query.model import LineageModel
from lineage.query.nodes import DATASET, JOB, Node, display_name


class NameResolution(LineageModel):
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
        jobs = self._job_columns
        text = pc.binary_join_element_wise(jobs.column("job_namespace"), jobs.column("job_name"), "/")
        hit = pc.or_(pc.is_in(text, value_set=wanted), pc.is_in(pc.utf8_rtrim(text, "/"), value_set=wanted))
        named = jobs.filter(hit)
        for namespace, name in zip(
            *(named.column(c).to_pylist() for c in ("job_namespace", "job_name")), strict=True
        ):
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


def _variants(key: str) -> list[str]:
    """The spellings a user may type for the same dataset (Hadoop s3a/s3n schemes, trailing slash)."""
    out = [key]
    for scheme in ("s3a://", "s3n://"):
        if key.startswith(scheme):
            out.append("s3://" + key[len(scheme) :])
    return out
