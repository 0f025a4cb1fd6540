"""Render a lineage graph dict (built by ``lineage graph``) as an HTML page, Graphviz DOT, Mermaid or JSON.

The graph dict holds ``root``, ``direction``, ``generated_at``, ``nodes`` (jobs and datasets with their
``fields``), ``edges`` (dataset read by / written by a job) and ``column_edges`` (field to field); an
edge's ``change`` (``added``, ``removed``: a diff's graph) colours it on the HTML page.
Every string in it is untrusted: names may hold quotes, ``<``, ``</script>``, backslashes, newlines or
any unicode, so each format escapes them its own way and never uses a raw name as an identifier.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, NamedTuple

from lineage.query.text import escape_unsafe

Graph = Mapping[str, Any]

FORMATS = ("html", "dot", "mermaid", "json")


class Style(NamedTuple):
    """How one kind of node is drawn in every format: legend text, stroke and fill colours."""

    label: str
    stroke: str
    fill: str


# Jobs are coloured by the state of their latest run; a missing or unknown state counts as OTHER.
STATE_STYLES: dict[str, Style] = {
    "RUNNING": Style("running", "#1d4ed8", "#dbeafe"),
    "COMPLETE": Style("complete", "#15803d", "#dcfce7"),
    "FAIL": Style("failed", "#b91c1c", "#fee2e2"),
    "LOST": Style("lost", "#c2410c", "#ffedd5"),
    "ABORT": Style("aborted", "#6d28d9", "#ede9fe"),
    "START": Style("started", "#0e7490", "#cffafe"),
    "OTHER": Style("other", "#4b5563", "#f3f4f6"),
}
DATASET_STYLE = Style("dataset", "#334155", "#f8fafc")
# Datasets are coloured by their own health (lineage.query.health): failing or late; any other is plain.
HEALTH_STYLES: dict[str, Style] = {
    "failing": Style("failing", "#b91c1c", "#fee2e2"),
    "late": Style("late", "#b45309", "#fef3c7"),
}
EDGE_COLOR = "#64748b"
COLUMN_EDGE_COLOR = "#db2777"
ROOT_COLOR = "#f59e0b"
# A diff's graph: edges that appeared and edges that stopped being observed (an edge's ``change``).
ADDED_COLOR = "#16a34a"
REMOVED_COLOR = "#dc2626"

# The files of the page, read from the package so that the CLI works from an installed wheel too.
_TEMPLATE = "page.html"
_VENDOR_SCRIPTS = ("cytoscape.min.js", "cytoscape-dagre.min.js")
_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")
_PAGE_SCRIPT = re.compile(r"<script>(.*?)</script>", flags=re.DOTALL)
# Every line boundary of str.splitlines() (U+2028 too), then the other control characters.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")


def render(graph: Graph, fmt: str) -> str:
    """The graph in format ``fmt`` (one of ``FORMATS``), as text ending with a newline."""
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown graph format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return renderer(graph)


def state_key(node: Mapping[str, Any]) -> str:
    """The ``STATE_STYLES`` key of a job node (OTHER when its state is missing or unknown)."""
    state = node.get("state")
    return state if isinstance(state, str) and state in STATE_STYLES else "OTHER"


def health_key(node: Mapping[str, Any]) -> str | None:
    """The ``HEALTH_STYLES`` key of a dataset node (None: drawn as any dataset)."""
    health = node.get("health")
    return health if isinstance(health, str) and health in HEALTH_STYLES else None


def node_style(node: Mapping[str, Any]) -> Style:
    """Colours of a node: its run state for a job, its health for a failing or late dataset, the dataset
    style otherwise."""
    if node.get("kind") == "job":
        return STATE_STYLES[state_key(node)]
    key = health_key(node)
    return DATASET_STYLE if key is None else HEALTH_STYLES[key]


@dataclass(frozen=True)
class _Checked:
    """The graph after the consistency checks, with each dataset's complete field list."""

    nodes: list[Mapping[str, Any]]
    edges: list[Mapping[str, Any]]
    column_edges: list[Mapping[str, Any]]
    # node id -> {field name: type or None}: the declared fields, then those only named by column edges.
    fields: dict[str, dict[str, str | None]]
    root: str | None


def _checked(graph: Graph) -> _Checked:
    """Reject duplicate node ids, edges whose ends are not nodes and column edges not between datasets."""
    nodes = list(graph.get("nodes") or [])
    fields: dict[str, dict[str, str | None]] = {}
    for node in nodes:
        if node["id"] in fields:
            raise ValueError(f"node {node['id']!r} appears twice in the graph")
        declared = fields[node["id"]] = {}
        for field in node.get("fields") or []:
            declared.setdefault(str(field["name"]), field.get("type"))
    edges = list(graph.get("edges") or [])
    column_edges = list(graph.get("column_edges") or [])
    for edge in edges + column_edges:
        for end in ("source", "target"):
            if edge[end] not in fields:
                raise ValueError(f"edge {edge['source']!r} -> {edge['target']!r}: {end} is not a node")
    kinds = {node["id"]: node.get("kind") for node in nodes}
    for edge in column_edges:
        for end in ("source", "target"):
            if kinds[edge[end]] != "dataset":
                raise ValueError(
                    f"column edge {edge['source']!r} -> {edge['target']!r}: {end} is not a dataset"
                )
            fields[edge[end]].setdefault(str(edge[f"{end}_field"]), None)
    root = graph.get("root")
    return _Checked(nodes, edges, column_edges, fields, root if root in fields else None)


def _clean(text: object) -> str:
    """Text whose line breaks (any kind) are ``\\n``, whose other C0 controls and DEL show as U+FFFD and
    whose C1 controls and bidi-formatting characters show as visible ``\\x9b``/``\\u202e`` text, as the
    CLI's tables print them (:func:`lineage.query.text.escape_unsafe`)."""
    text = _CONTROL.sub("\N{REPLACEMENT CHARACTER}", _LINE_BREAK.sub("\n", str(text)))
    return escape_unsafe(text, keep="\n\t")


def _field_text(name: str, type_: str | None) -> str:
    return f"{name}: {type_}" if type_ else name


def _title(graph: Graph) -> str:
    root = graph.get("root")
    head = f"Lineage of {root}" if root else "Lineage graph"
    return f"{head} ({graph.get('direction') or 'both'}), generated {graph.get('generated_at') or '?'}"


def render_json(graph: Graph) -> str:
    """The graph dict itself: pretty, keys sorted, unicode kept but for C1 controls and bidi-formatting
    characters, written as ``\\u`` escapes (the encoder escapes the C0 controls; the line breaks kept are
    the document's own)."""
    text = json.dumps(graph, indent=2, sort_keys=True, ensure_ascii=False)
    return escape_unsafe(text, keep="\n", as_json=True) + "\n"


# --- Graphviz DOT ---------------------------------------------------------------------------------


def _dot_string(text: object) -> str:
    """A double-quoted DOT string shown literally in a label (backslash escapes are not interpreted)."""
    escaped = _clean(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _dot_html(text: object) -> str:
    """Text for a Graphviz HTML-like label."""
    return html.escape(_clean(text), quote=True).replace("\n", "<BR/>")


def _dot_attrs(**attrs: str) -> str:
    return "[" + ", ".join(f"{key}={value}" for key, value in attrs.items()) + "]"


def render_dot(graph: Graph) -> str:
    """A Graphviz digraph: jobs as rounded boxes, datasets as cylinders, or tables when columns are drawn."""
    checked = _checked(graph)
    ids = {node["id"]: f"n{i}" for i, node in enumerate(checked.nodes)}
    tables = bool(checked.column_edges)
    title = _dot_string(_title(graph))
    lines = [
        "digraph lineage {",
        f"  graph {_dot_attrs(rankdir='LR', labelloc='t', fontname='Helvetica', label=title)};",
        f"  node {_dot_attrs(fontname='Helvetica', fontsize='11')};",
        f"  edge {_dot_attrs(color=_dot_string(EDGE_COLOR), arrowsize='0.7')};",
    ]
    for node in checked.nodes:
        style = node_style(node)
        is_root = node["id"] == checked.root
        fields = checked.fields[node["id"]]
        common = {"tooltip": _dot_string(node["id"]), "penwidth": "3" if is_root else "1"}
        if node.get("kind") == "job":
            label = f"{node.get('label') or node['name']}\n{style.label}"
            attrs = _dot_attrs(
                shape="box",
                style='"rounded,filled"',
                color=_dot_string(style.stroke),
                fillcolor=_dot_string(style.fill),
                label=_dot_string(label),
                **common,
            )
        elif tables and fields:
            rows = "".join(
                f'<TR><TD PORT="f{i}" ALIGN="LEFT">{_dot_html(_field_text(name, type_))}</TD></TR>'
                for i, (name, type_) in enumerate(fields.items())
            )
            table = (
                f'<TABLE BORDER="{3 if is_root else 1}" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3"'
                f' COLOR="{style.stroke}" BGCOLOR="{style.fill}">'
                f'<TR><TD BGCOLOR="#e2e8f0"><B>{_dot_html(node.get("label") or node["name"])}</B></TD></TR>'
                f"{rows}</TABLE>"
            )
            attrs = _dot_attrs(shape="plain", label=f"<{table}>", tooltip=common["tooltip"])
        else:
            attrs = _dot_attrs(
                shape="cylinder",
                style="filled",
                color=_dot_string(style.stroke),
                fillcolor=_dot_string(style.fill),
                label=_dot_string(node.get("label") or node["name"]),
                **common,
            )
        lines.append(f"  {ids[node['id']]} {attrs};")
    for edge in checked.edges:
        tooltip = _dot_string(edge.get("kind") or "")
        # A job -> job dependency (control flow) is dotted, apart from the data flow.
        extra = {"style": "dotted"} if edge.get("kind") == "dependency" else {}
        lines.append(
            f"  {ids[edge['source']]} -> {ids[edge['target']]} {_dot_attrs(tooltip=tooltip, **extra)};"
        )
    for edge in checked.column_edges:
        ends = []
        for end, compass in (("source", "e"), ("target", "w")):
            port = list(checked.fields[edge[end]]).index(str(edge[f"{end}_field"]))
            ends.append(f"{ids[edge[end]]}:f{port}:{compass}")
        tooltip = f"{edge['source_field']} → {edge['target_field']}: {edge.get('transformation') or '?'}"
        attrs = _dot_attrs(
            style="dashed",
            color=_dot_string(COLUMN_EDGE_COLOR),
            constraint="false",
            tooltip=_dot_string(tooltip),
        )
        lines.append(f"  {ends[0]} -> {ends[1]} {attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- Mermaid --------------------------------------------------------------------------------------

# Characters that Mermaid would read as syntax inside a quoted label, written as its #code; entities.
_MERMAID_ENTITIES = {char: f"#{ord(char)};" for char in '"#&<>`|'}


def _mermaid_text(text: object) -> str:
    """A double-quoted Mermaid label."""
    cleaned = "".join(_MERMAID_ENTITIES.get(char, char) for char in _clean(text))
    return '"' + cleaned.replace("\n", "<br>") + '"'


def _mermaid_class(key: str) -> str:
    return f"state_{key.lower()}"


def render_mermaid(graph: Graph) -> str:
    """A Mermaid flowchart: ids n0, n1, ..., jobs as rounded boxes, datasets as cylinders."""
    checked = _checked(graph)
    ids = {node["id"]: f"n{i}" for i, node in enumerate(checked.nodes)}
    title = _clean(_title(graph)).replace("\n", " ")
    lines = ["flowchart LR", f"  %% {title}"]
    classes: dict[str, list[str]] = {}
    for node in checked.nodes:
        node_id = ids[node["id"]]
        if node.get("kind") == "job":
            key = state_key(node)
            label = f"{node.get('label') or node['name']}\n{STATE_STYLES[key].label}"
            lines.append(f"  {node_id}({_mermaid_text(label)})")
            classes.setdefault(_mermaid_class(key), []).append(node_id)
        else:
            lines.append(f"  {node_id}[({_mermaid_text(node.get('label') or node['name'])})]")
            health = health_key(node)
            classes.setdefault("dataset" if health is None else f"dataset_{health}", []).append(node_id)
    for edge in checked.edges:
        arrow = "==>" if edge.get("kind") == "dependency" else "-->"  # control flow drawn thick
        lines.append(f"  {ids[edge['source']]} {arrow} {ids[edge['target']]}")
    for edge in checked.column_edges:
        label = _mermaid_text(f"{edge['source_field']} → {edge['target_field']}")
        lines.append(f"  {ids[edge['source']]} -.->|{label}| {ids[edge['target']]}")
    styles = {_mermaid_class(key): style for key, style in STATE_STYLES.items()} | {"dataset": DATASET_STYLE}
    styles |= {f"dataset_{key}": style for key, style in HEALTH_STYLES.items()}
    for name, members in classes.items():
        style = styles[name]
        lines.append(f"  classDef {name} fill:{style.fill},stroke:{style.stroke},color:#111827")
        lines.append(f"  class {','.join(members)} {name}")
    if checked.root is not None:
        lines.append(f"  classDef root stroke:{ROOT_COLOR},stroke-width:4px")
        lines.append(f"  class {ids[checked.root]} root")
    return "\n".join(lines) + "\n"


# --- HTML -----------------------------------------------------------------------------------------


def _script_json(value: object) -> str:
    """JSON that is inert inside a <script> element: no ``</script>``, ``<!--`` or JS line separators."""
    text = json.dumps(value, ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def _script_hash(code: str) -> str:
    digest = hashlib.sha256(code.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def _page_data(graph: Graph, checked: _Checked) -> dict[str, Any]:
    """What the page script reads: the graph with each dataset's complete fields, and the colours."""
    nodes = []
    for node in checked.nodes:
        fields = checked.fields[node["id"]].items()
        nodes.append(dict(node, fields=[{"name": name, "type": type_} for name, type_ in fields]))
    return {
        "graph": dict(graph, nodes=nodes, edges=checked.edges, column_edges=checked.column_edges),
        "root": checked.root,
        "styles": {
            "states": {key: style._asdict() for key, style in STATE_STYLES.items()},
            "dataset": DATASET_STYLE._asdict(),
            "health": {key: style._asdict() for key, style in HEALTH_STYLES.items()},
            "edge": EDGE_COLOR,
            "column_edge": COLUMN_EDGE_COLOR,
            "root": ROOT_COLOR,
            "added": ADDED_COLOR,
            "removed": REMOVED_COLOR,
        },
    }


def render_html(graph: Graph) -> str:
    """One self-contained page (vendored cytoscape.js and dagre inlined) that needs no network."""
    checked = _checked(graph)
    package = resources.files("lineage.graph")
    template = package.joinpath(_TEMPLATE).read_text(encoding="utf-8")
    vendor = [package.joinpath("vendor", name).read_text(encoding="utf-8") for name in _VENDOR_SCRIPTS]
    for name, code in zip(_VENDOR_SCRIPTS, vendor, strict=True):
        if "</script" in code.lower() or "<!--" in code:
            raise RuntimeError(f"vendor/{name} cannot be inlined into a <script> element")
    page_script = _PAGE_SCRIPT.search(template)
    if page_script is None:
        raise RuntimeError(f"{_TEMPLATE} has no page script")
    values = {
        "TITLE": html.escape(_clean(_title(graph)).replace("\n", " ")),
        # The page runs only these scripts, byte for byte, and may load nothing at all.
        "CSP_SCRIPTS": " ".join(_script_hash(code) for code in [*vendor, page_script.group(1)]),
        "VENDOR_JS": "\n".join(f"<script>{code}</script>" for code in vendor),
        "DATA": _script_json(_page_data(graph, checked)),
    }
    if set(_PLACEHOLDER.findall(template)) != set(values):
        raise RuntimeError(f"{_TEMPLATE} does not hold exactly the placeholders {sorted(values)}")
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


_RENDERERS: dict[str, Callable[[Graph], str]] = {
    "html": render_html,
    "dot": render_dot,
    "mermaid": render_mermaid,
    "json": render_json,
}
