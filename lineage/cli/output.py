"""Human-readable tables and JSON for the ``lineage`` commands."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click
import orjson

from lineage.query.answers import problem_words
from lineage.query.nodes import DATASET
from lineage.query.text import escape_unsafe

# orjson, not the standard library: with an indent the standard encoder is pure Python (a deep walk from a
# hub at tier M, 3 MB of JSON, took about 0.1 s of the command's second). Same document, same text rules:
# keys sorted, two-space indent, anything else through str(), and ASCII only, since a name may carry
# terminal controls or bidi overrides (orjson writes UTF-8; every non-ASCII character is escaped after).
_JSON_OPTIONS = (
    orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
)
_NON_ASCII = re.compile(r"[^\x00-\x7e]")  # DEL too, as the standard encoder does


def _escape(match: re.Match[str]) -> str:
    """A character as a JSON escape, as a UTF-16 surrogate pair above the BMP."""
    code = ord(match.group())
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(data: Any) -> str:
    """``data`` as the CLI prints it (:func:`emit_json`)."""
    text = orjson.dumps(data, default=str, option=_JSON_OPTIONS).decode()
    return text if text.isascii() and "\x7f" not in text else _NON_ASCII.sub(_escape, text)


def emit_json(data: Any) -> None:
    click.echo(json_text(data))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> None:
    """Columns padded to the widest cell; ``-`` for missing values."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))
    echo(indent + line.rstrip())
    for row in cells:
        echo(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def safe_text(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with control and bidi-formatting characters written as escapes (``\\x1b``, ``\\u202e``).

    Names come from whoever sent the event; printed raw, an escape sequence in a job name could retitle or
    repaint the reader's terminal. JSON output is not escaped this way (:func:`json_text` escapes controls
    itself and values stay exact).
    """
    return escape_unsafe(text, keep="\n" if keep_newlines else "")


def echo(text: str = "", **kwargs: Any) -> None:
    """``click.echo`` for human-readable lines: everything but the line breaks made safe."""
    click.echo(safe_text(text, keep_newlines=True), **kwargs)


def _when(value: Any) -> Any:
    """An ISO-8601 time of a JSON answer as a datetime (printed as the other tables' times); else as is."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return value
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
    return safe_text(str(value))


def print_traversal(data: dict[str, Any]) -> None:
    """A walk as ``lineage upstream/downstream`` prints it, from its JSON document
    (:func:`lineage.query.answers.traversal_json`, the read API's ``/api/v2/upstream`` answer too)."""
    root = data["root"]
    when = f", edges seen by {data['as_of']}" if data.get("as_of") else ""
    echo(f"{data['direction']} of {root['kind']} {root['label']} (depth {data['depth']}{when})")
    nodes = sorted(data["nodes"], key=lambda n: (n["hops"], n["label"]))
    if not nodes:
        echo(f"  nothing {data['direction']}")
    else:
        table(
            ["hops", "kind", "node", "state"],
            [
                (n["hops"], n["kind"], n["label"], None if n["kind"] == DATASET else n.get("state"))
                for n in nodes
            ],
            indent="  ",
        )
    if data.get("dependencies"):
        labels = {n["id"]: n["label"] for n in [root, *nodes]}
        echo("job dependencies")
        links = sorted(
            (labels.get(d["source"], d["source"]), labels.get(d["target"], d["target"]), d["via"])
            for d in data["dependencies"]
        )
        table(["upstream job", "downstream job", "via"], links, indent="  ")
    if "column_edges" in data:
        echo("column lineage")
        if not data["column_edges"]:
            echo("  no column lineage")
            return
        rows = [
            (
                f"{e['source']}.{e['source_field']}",
                f"{e['target']}.{e['target_field']}",
                e["job"],
                e["transformation"],
            )
            for e in data["column_edges"]
        ]
        table(["from", "to", "job", "transformation"], sorted(rows), indent="  ")


def print_impact(data: dict[str, Any]) -> None:
    root = data["root"]
    what = f"{root['label']}.{root['field']}" if root.get("field") else root["label"]
    echo(f"impact of a change to {what}")
    if root.get("health") not in (None, "ok", "unknown"):
        echo(f"  its health: {root['health']} ({problem_text(root.get('problems') or [])})")
    if not (data["datasets"] or data["jobs"] or data["columns"]):
        echo("  nothing downstream")
        return
    echo(f"datasets ({len(data['datasets'])})")
    rows = [
        (d["hops"], d["dataset"], d.get("health"), problem_text(d.get("problems") or []))
        for d in data["datasets"]
    ]
    table(["hops", "dataset", "health", "problems"], rows, indent="  ")
    echo(f"jobs ({len(data['jobs'])})")
    jobs = [(j["hops"], j["label"], j.get("state")) for j in data["jobs"]]
    table(["hops", "job", "state"], jobs, indent="  ")
    echo(f"columns ({len(data['columns'])})")
    columns = [
        (c["jobs"], f"{c['dataset']}.{c['field']}", ", ".join(c.get("failing") or []))
        for c in data["columns"]
    ]
    table(["jobs", "column", "failing assertions"], columns, indent="  ")


def problem_text(problems: Sequence[dict[str, Any]]) -> str:
    """Problems of a node's own health, a few words each (:func:`lineage.query.answers.problem_words`)."""
    return "; ".join(problem_words(p) for p in problems)


def print_tags(data: dict[str, Any]) -> None:
    dataset = data["dataset"]
    own = ", ".join(_tag_text(t["key"], t["value"]) for t in data["dataset_tags"])
    echo(f"tags of the columns of {dataset['label']}" + (f" (the dataset itself: {own})" if own else ""))
    if not data["tags"]:
        echo("  no column tags")
    else:
        rows = []
        for t in data["tags"]:
            origin = t["origin"]
            source = f"rule {origin['rule']}" if origin["kind"] == "rule" else "tags facet"
            at = "here" if t["hops"] == 0 else f"{origin['dataset']}.{origin['field']}"
            path = " -> ".join(f"{s['job']} -> {s['dataset']}.{s['field']}" for s in t["path"])
            rows.append((t["field"], _tag_text(t["tag"], t["value"]), source, at, t["hops"], path))
        table(["column", "tag", "from", "origin", "hops", "path"], rows, indent="  ")
    for rule in data["unmatched_rules"]:
        echo(f"warning: tag rule {rule['rule']} (pattern {rule['pattern']!r}) matches no field in the lake")


def _tag_text(key: str | None, value: str | None) -> str:
    shown = repr(key) if not key or key != key.strip() else key
    return shown if value is None else f"{shown}={value}"


def print_health(data: dict[str, Any]) -> None:
    node = data["node"]
    echo(f"health of {node['kind']} {node['label']} as of {data['as_of']}: {data['state']}")
    if data["problems"]:
        echo(f"  {problem_text(data['problems'])}")
    fresh = data.get("freshness")
    if fresh:
        interval = fresh["expected_interval_seconds"]
        expected = (
            "not learned yet"
            if interval is None
            else f"every {interval:g} s, late after {fresh['late_after']}"
        )
        count = fresh["successful_writes"]
        echo(f"  last successful write {fresh['last_success']} ({count} in all; {expected})")
    if data.get("assertions"):
        echo(f"assertions ({len(data['assertions'])})")
        rows = [
            (a["assertion"], a["column"] or "*", a["success"], a["checked_at"], a.get("problem") or "")
            for a in data["assertions"]
        ]
        table(["assertion", "column", "success", "checked", "note"], rows, indent="  ")
    echo(f"upstream: {data['upstream']}")
    if not data["causes"]:
        echo("  no upstream cause")
        return
    echo(f"causes ({len(data['causes'])})")
    rows = [
        (c["hops"], c["label"], c["state"], problem_text(c["problems"]), " -> ".join(c["path"]))
        for c in data["causes"]
    ]
    table(["hops", "node", "state", "problems", "path"], rows, indent="  ")


def state_text(row: dict[str, Any]) -> str:
    reported, inferred = row.get("reported_state"), row.get("inferred_state")
    return f"{reported}->{inferred}" if reported and inferred and reported != inferred else str(inferred)


def print_runs(rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        echo("no runs match")
        return
    table(
        ["run id", "job", "state", "started", "last event", "seconds"],
        [
            (
                r["run_id"],
                f"{r['job_namespace']}/{r['job_name']}",
                state_text(r),
                _when(r["started_at"]),
                _when(r["last_event_at"]),
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
    if data.get("silent_seconds") is not None:
        # Derived at read time (lineage.query.liveness): how long the still-running run has been silent.
        pairs.insert(7, ("silent s", round(data["silent_seconds"])))
    if data["parent_run_id"]:
        parent = f"{data['parent_job_namespace']}/{data['parent_job_name']}"
        pairs.append(("parent", f"{parent} {data['parent_run_id']}"))
    if data["error_message"]:
        pairs.append(("error", data["error_message"]))
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        echo(f"{key.ljust(width)}  {_cell(value) if value != '' else '-'}")
    echo(f"children ({len(data['children'])})")
    if data["children"]:
        table(
            ["run id", "job", "state", "started"],
            [
                (c["run_id"], f"{c['job_namespace']}/{c['job_name']}", state_text(c), c["started_at"])
                for c in data["children"]
            ],
            indent="  ",
        )
    dependencies = data.get("dependencies") or []
    echo(f"job dependencies ({len(dependencies)})")
    if dependencies:
        table(
            ["direction", "job", "via", "type"],
            [(d["direction"], d["job"], d["via"], d["dependency_type"]) for d in dependencies],
            indent="  ",
        )
    echo(f"datasets ({len(data['datasets'])})")
    if data["datasets"]:
        table(
            ["direction", "dataset", "rows"],
            [(d["direction"], d["dataset"], d["row_count"]) for d in data["datasets"]],
            indent="  ",
        )
    read, written = data.get("versions_read") or [], data.get("versions_written") or []
    echo(f"versions read ({len(read)})")
    if read:
        table(
            ["dataset", "version", "written by run", "job"],
            [(r["dataset"], r["version"], r["written_by_run_id"], r["written_by_job"]) for r in read],
            indent="  ",
        )
    echo(f"versions written ({len(written)})")
    if written:
        table(
            ["dataset", "version", "rows", "schema", "lifecycle"],
            [
                (v["dataset"], v["version"], v["row_count"], v["schema_version"], _lifecycle(v))
                for v in written
            ],
            indent="  ",
        )


def _lifecycle(version: dict[str, Any]) -> str | None:
    return ",".join(version["lifecycle_states"]) or None


def print_versions(data: dict[str, Any]) -> None:
    """A dataset's versions, newest first: the write that made each, its schema and statistics."""
    count = len(data["versions"])
    echo(f"{data['dataset']['label']}: {count} version{'s' * (count != 1)}")
    if data["versions"]:
        table(
            ["version", "written", "run", "job", "state", "rows", "schema", "lifecycle"],
            [
                (
                    v["version"],
                    v["written_at"],
                    v["run_id"],
                    v["job"],
                    v["run_state"],
                    v["row_count"],
                    v["schema_version"],
                    _lifecycle(v),
                )
                for v in data["versions"]
            ],
        )


def print_version_lineage(data: dict[str, Any]) -> None:
    """A version and the versions upstream of it, nearest first, each with what its writer read."""
    for step in data["steps"]:
        indent = "  " * step["depth"]
        echo(
            f"{indent}{step['dataset']} @ {step['version']}  written {_cell(step['written_at'])} by "
            f"{_cell(step['job'])} run {step['run_id']} ({_cell(step['run_state'])})"
        )
        for read in step["inputs"]:
            writer = read["written_by_run_id"]
            echo(
                f"{indent}  read {read['dataset']} @ {_cell(read['version'])}"
                + (f"  (written by run {writer})" if writer else "  (writer unknown)")
            )


def print_diff(data: dict[str, Any]) -> None:
    """A diff of two windows: ``+`` appeared (or started), ``-`` stopped being observed, ``~`` changed;
    each kind counted in its title, the changes not listed counted after those that are."""
    base, current, counts = data["base"], data["current"], data["counts"]
    echo(f"{current['from']} .. {current['to']} against {base['from']} .. {base['to']}")
    sections = (
        ("job edges", "job_edges", ("appeared", "stopped"), _job_edge_text),
        ("dataset edges", "dataset_edges", ("appeared", "stopped"), _flow_text),
        ("column edges", "column_edges", ("appeared", "stopped"), _column_text),
        ("writers", "writers", ("started", "stopped"), _writer_text),
    )
    for title, kind, (added, removed), text in sections:
        echo(f"{title} (+{counts[kind][added]} -{counts[kind][removed]})")
        for sign, side in (("+", added), ("-", removed)):
            for item in data[kind][side]:
                echo(f"  {sign} {text(item)}")
            _more(sign, counts[kind][side], data[kind][side])
    echo(f"schemas changed ({counts['schemas']})")
    for schema in data["schemas"]:
        changes = [f"+{f}" for f in schema["fields_added"]] + [f"-{f}" for f in schema["fields_removed"]]
        changes += [f"~{f['name']} {f['before']}->{f['after']}" for f in schema["fields_retyped"]]
        echo(f"  ~ {schema['dataset']}: {' '.join(changes) or 'fields reordered or described anew'}")
    _more("~", counts["schemas"], data["schemas"])
    echo(f"run outcomes changed ({counts['outcomes']})")
    for change in data["outcomes"]:
        before, after = change["before"], change["after"]
        echo(f"  ~ {change['job']}: {before['state']} -> {after['state']} (run {after['run_id']})")
    _more("~", counts["outcomes"], data["outcomes"])
    if any(_unlisted(data)):
        echo(f"(the first {data['limit']} of each kind listed: --limit N or --all for more)")


def _more(sign: str, count: int, listed: list[Any]) -> None:
    if count > len(listed):
        echo(f"  {sign} ... {count - len(listed)} more")


def _unlisted(data: dict[str, Any]) -> list[bool]:
    counts = data["counts"]
    found = [counts[k] > len(data[k]) for k in ("schemas", "outcomes")]
    for kind in ("job_edges", "dataset_edges", "column_edges", "writers"):
        found += [counts[kind][side] > len(data[kind][side]) for side in counts[kind]]
    return found


def _job_edge_text(edge: dict[str, Any]) -> str:
    if edge["direction"] == "input":
        return f"{edge['dataset']} -> {edge['job']}"
    return f"{edge['job']} -> {edge['dataset']}"


def _flow_text(edge: dict[str, Any]) -> str:
    return f"{edge['source']} -> {edge['target']} (via {edge['job']})"


def _column_text(edge: dict[str, Any]) -> str:
    target = edge["target"] if edge["target_field"] is None else f"{edge['target']}.{edge['target_field']}"
    return f"{edge['source']}.{edge['source_field']} -> {target} (via {edge['job']})"


def _writer_text(entry: dict[str, Any]) -> str:
    return f"{entry['job']} writes {entry['dataset']}"
