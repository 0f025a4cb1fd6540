"""Human-readable tables and JSON for the ``lineage`` commands."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

from lineage.cli.store import DATASET, LineageStore, Traversal


def iso(value: Any) -> Any:
    """Datetimes as ISO-8601 UTC strings (``Z``); everything else unchanged."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> None:
    """Columns padded to the widest cell; ``-`` for missing values."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))
    click.echo(indent + line.rstrip())
    for row in cells:
        click.echo(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
    return str(value)


def _state(store: LineageStore, namespace: str, name: str) -> str | None:
    return store.job_summary.get((namespace, name), {}).get("last_run_state")


def print_traversal(store: LineageStore, walk: Traversal, as_of: datetime | None) -> None:
    when = f", edges seen by {iso(as_of)}" if as_of else ""
    click.echo(f"{walk.direction} of {walk.root.kind} {walk.root.label} (depth {walk.depth}{when})")
    nodes = sorted(
        ((n, h) for n, h in walk.hops.items() if n != walk.root), key=lambda item: (item[1], item[0].label)
    )
    if not nodes:
        click.echo(f"  nothing {walk.direction}")
    else:
        table(
            ["hops", "kind", "node", "state"],
            [
                (h, n.kind, n.label, None if n.kind == DATASET else _state(store, n.namespace, n.name))
                for n, h in nodes
            ],
            indent="  ",
        )
    if walk.column_edges or walk.columns:
        click.echo("column lineage")
        if not walk.column_edges:
            click.echo("  no column lineage")
            return
        rows = []
        for edge in walk.column_edges:
            source = store.dataset_nodes.get(edge["source_dataset_id"])
            target = store.dataset_nodes.get(edge["target_dataset_id"])
            rows.append(
                (
                    f"{source.label if source else edge['source_dataset_id']}.{edge['source_field'] or '*'}",
                    f"{target.label if target else edge['target_dataset_id']}.{edge['target_field'] or '*'}",
                    f"{edge['job_namespace']}/{edge['job_name']}",
                    "/".join(edge["subtypes"] or []) or None,
                )
            )
        table(["from", "to", "job", "transformation"], sorted(rows), indent="  ")


def print_impact(data: dict[str, Any]) -> None:
    root = data["root"]
    what = f"{root['label']}.{root['field']}" if root.get("field") else root["label"]
    click.echo(f"impact of a change to {what}")
    if not (data["datasets"] or data["jobs"] or data["columns"]):
        click.echo("  nothing downstream")
        return
    click.echo(f"datasets ({len(data['datasets'])})")
    table(["hops", "dataset"], [(d["hops"], d["dataset"]) for d in data["datasets"]], indent="  ")
    click.echo(f"jobs ({len(data['jobs'])})")
    jobs = [(j["hops"], j["label"], j.get("state")) for j in data["jobs"]]
    table(["hops", "job", "state"], jobs, indent="  ")
    click.echo(f"columns ({len(data['columns'])})")
    columns = [(c["jobs"], f"{c['dataset']}.{c['field']}") for c in data["columns"]]
    table(["jobs", "column"], columns, indent="  ")


def state_text(row: dict[str, Any]) -> str:
    reported, inferred = row.get("reported_state"), row.get("inferred_state")
    return f"{reported}->{inferred}" if reported and inferred and reported != inferred else str(inferred)


def print_runs(rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        click.echo("no runs match")
        return
    table(
        ["run id", "job", "state", "started", "last event", "seconds"],
        [
            (
                r["run_id"],
                f"{r['job_namespace']}/{r['job_name']}",
                state_text(r),
                r["started_at"],
                r["last_event_at"],
                r["duration_seconds"],
            )
            for r in rows
        ],
    )


def _engine(data: dict[str, Any]) -> str:
    return " ".join(filter(None, [data["processing_engine_name"], data["processing_engine_version"]]))


def print_run(data: dict[str, Any]) -> None:
    pairs = [
        ("run", data["run_id"]),
        ("job", f"{data['job_namespace']}/{data['job_name']}"),
        ("state", state_text(data)),
        ("liveness", data["liveness_reason"]),
        ("started", data["started_at"]),
        ("ended", data["ended_at"]),
        ("last event", data["last_event_at"]),
        ("duration s", data["duration_seconds"]),
        ("events", data["event_count"]),
        ("engine", _engine(data)),
    ]
    if data["parent_run_id"]:
        parent = f"{data['parent_job_namespace']}/{data['parent_job_name']}"
        pairs.append(("parent", f"{parent} {data['parent_run_id']}"))
    if data["error_message"]:
        pairs.append(("error", data["error_message"]))
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        click.echo(f"{key.ljust(width)}  {_cell(value) if value != '' else '-'}")
    click.echo(f"children ({len(data['children'])})")
    if data["children"]:
        table(
            ["run id", "job", "state", "started"],
            [
                (c["run_id"], f"{c['job_namespace']}/{c['job_name']}", state_text(c), c["started_at"])
                for c in data["children"]
            ],
            indent="  ",
        )
    click.echo(f"datasets ({len(data['datasets'])})")
    if data["datasets"]:
        table(
            ["direction", "dataset", "rows"],
            [(d["direction"], d["dataset"], d["row_count"]) for d in data["datasets"]],
            indent="  ",
        )
