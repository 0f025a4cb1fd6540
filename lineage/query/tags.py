"""Tags along column lineage as read: ``lineage tags DATASET`` and ``/api/v2/tags`` (``lineage.column_tags``,
computed by the build: lineage.transforms.tags)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.query.errors import LookupError_
from lineage.query.nodes import DATASET
from lineage.query.params import has_tag, parse_tag

if TYPE_CHECKING:
    from lineage.query.store import LineageStore


def unmatched_rules(store: LineageStore) -> list[dict[str, str]]:
    """The ``[tags.rules]`` rules that match no field of the lake (as of the last build), with their
    pattern: a rule that matches nothing is reported, never silently ignored."""
    rules = store.settings.tags.rules
    if not rules:
        return []
    from lineage.query.tables import expressions

    ex = expressions()
    try:
        rows = store.rows(
            "column_tags", ("rule",), ex.And(ex.EqualTo("origin_kind", "rule"), ex.EqualTo("hops", 0))
        )
    except LookupError_ as exc:
        if "does not exist" in str(exc) or "not held" in str(exc):
            rows = []
        else:
            raise
    matched = {r["rule"] for r in rows}
    return [{"rule": n, "pattern": rules[n].pattern} for n in sorted(rules) if n not in matched]


def tags_of(
    store: LineageStore, target: str, field: str | None = None, tag: str | None = None
) -> dict[str, Any]:
    """The column tags of a dataset (optionally one field, one tag ``KEY`` or ``KEY=VALUE``), each with its
    origin and path, as ``lineage tags --json``; the dataset's own tags (not given to its columns) and the
    rules that match nothing come with them."""
    root = store.resolve(target)
    if root.kind != DATASET:
        raise LookupError_(f"{root.label} is a job: lineage tags takes a dataset")
    wanted = [parse_tag(tag)] if tag else []
    rows = [
        r
        for r in store.column_tag_rows([root.dataset_id or ""])
        if (field is None or r["field"] == field)
        and (not wanted or has_tag([{"key": r["tag"], "value": r["value"]}], wanted))
    ]
    ids = {r["origin_dataset_id"] for r in rows} | {s["dataset_id"] for r in rows for s in r["path"] or []}
    nodes = store.nodes_of(ids)

    def label(dataset_id: str) -> str:
        node = nodes.get(dataset_id)
        return node.label if node is not None else dataset_id

    tags = [
        {
            "field": r["field"],
            "tag": r["tag"],
            "value": r["value"],
            "origin": {
                "kind": r["origin_kind"],
                "rule": r["rule"],
                "dataset": label(r["origin_dataset_id"]),
                "field": r["origin_field"],
            },
            "hops": r["hops"],
            "path": [
                {
                    "job": f"{s['job_namespace']}/{s['job_name']}",
                    "dataset": label(s["dataset_id"]),
                    "field": s["field"],
                }
                for s in r["path"] or []
            ],
        }
        for r in rows
    ]
    tags.sort(key=lambda t: (t["field"] or "", t["tag"] or "", t["hops"], str(t["origin"]), t["value"] or ""))
    return {
        "dataset": {"id": root.id, "label": root.label},
        "dataset_tags": [
            {"key": t.get("key"), "value": t.get("value")}
            for t in store.dataset_tags.get(root.dataset_id or "", [])
        ],
        "tags": tags,
        "unmatched_rules": unmatched_rules(store),
    }
