"""lineage.graph.render: the DOT, Mermaid, JSON and HTML texts, checked as strings (no browser)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import shutil
import subprocess
from typing import Any

import pytest

from lineage.graph.render import (
    COLUMN_EDGE_COLOR,
    DATASET_STYLE,
    FORMATS,
    HEALTH_STYLES,
    STATE_STYLES,
    render,
)

# Names that break naive escaping in one format or another.
NASTY = 'we"ird</script><!--\\ \u2028x\ny#quot;`|&'
SHOWN = NASTY.replace("\u2028", "\n")  # every kind of line break is drawn as one
TOPIC = "dataset:kafka://kafka-1:19092/orders"
FLINK = "job:flink-jobs/orders-ingest"
TABLE = "dataset:s3://warehouse/default.db/orders"
SPARK = "job:spark/" + NASTY
REPORT = "dataset:s3://warehouse/" + NASTY


def _node(
    node_id: str, state: str | None = None, fields: tuple[str, ...] = (), hops: int = 1
) -> dict[str, Any]:
    kind, _, rest = node_id.partition(":")
    namespace, _, name = rest.rpartition("/")
    return {
        "id": node_id,
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "label": name,
        "state": state,
        "hops": hops,
        "details": {"latest run": "0192-run"} if kind == "job" else {"aliases": [namespace + "/alias"]},
        "fields": [{"name": field, "type": "string"} for field in fields],
    }


def _graph(column_edges: bool = True) -> dict[str, Any]:
    """Kafka topic -> Flink job (LOST) -> table -> Spark job with a nasty name (FAIL) -> nasty table."""
    return {
        "root": TABLE,
        "direction": "both",
        "generated_at": "2026-11-22T10:00:00Z",
        "nodes": [
            _node(TOPIC, fields=("order_id", "price"), hops=2),
            _node(FLINK, "LOST"),
            _node(TABLE, fields=("order_id", "price"), hops=0),
            _node(SPARK, "FAIL"),
            _node(REPORT, fields=("total", NASTY), hops=2),
        ],
        "edges": [
            {"source": TOPIC, "target": FLINK, "kind": "input"},
            {"source": FLINK, "target": TABLE, "kind": "output"},
            {"source": TABLE, "target": SPARK, "kind": "input"},
            {"source": SPARK, "target": REPORT, "kind": "output"},
        ],
        "column_edges": (
            [
                {
                    "source": TOPIC,
                    "source_field": "price",
                    "target": TABLE,
                    "target_field": "price",
                    "transformation": "DIRECT/IDENTITY",
                    "job": FLINK,
                },
                {
                    "source": TABLE,
                    "source_field": "price",
                    "target": REPORT,
                    "target_field": NASTY,
                    "transformation": "DIRECT/AGGREGATION",
                    "job": SPARK,
                },
                # A field that the table's schema does not list: it must still get a port / a node.
                {
                    "source": TABLE,
                    "source_field": "discount",
                    "target": REPORT,
                    "target_field": "total",
                    "transformation": None,
                    "job": None,
                },
            ]
            if column_edges
            else []
        ),
    }


EMPTY: dict[str, Any] = {
    "root": None,
    "direction": "both",
    "generated_at": "2026-11-22T10:00:00Z",
    "nodes": [],
    "edges": [],
    "column_edges": [],
}


# --- the API --------------------------------------------------------------------------------------


def test_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"'svg'.*html, dot, mermaid, json"):
        render(_graph(), "svg")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_text_and_leaves_the_graph_alone(fmt: str) -> None:
    graph = _graph()
    before = copy.deepcopy(graph)
    text = render(graph, fmt)
    assert text.endswith("\n") and len(text) > 100
    assert graph == before


@pytest.mark.parametrize("fmt", ["html", "dot", "mermaid"])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g["edges"].append({"source": TOPIC, "target": "job:x/y", "kind": "input"}), "not a node"),
        (lambda g: g["nodes"].append(_node(FLINK)), "appears twice"),
        (lambda g: g["column_edges"][0].update(source=FLINK), "not a dataset"),
    ],
)
def test_inconsistent_graph_is_rejected(fmt: str, change: Any, message: str) -> None:
    graph = _graph()
    change(graph)
    with pytest.raises(ValueError, match=message):
        render(graph, fmt)


# --- JSON -----------------------------------------------------------------------------------------


def test_json_is_the_graph_with_sorted_keys() -> None:
    graph = _graph()
    text = render(graph, "json")
    assert json.loads(text) == graph
    assert list(json.loads(text)) == sorted(graph)
    assert list(json.loads(text)["nodes"][0]) == sorted(graph["nodes"][0])
    assert json.dumps(NASTY, ensure_ascii=False) in text
    shuffled = dict(reversed(list(graph.items())))
    assert render(shuffled, "json") == text


# --- DOT ------------------------------------------------------------------------------------------

_DOT_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_DOT_HTML_LABEL = re.compile(r"label=<(<TABLE.*?</TABLE>)>")


def _dot_statements(text: str) -> list[str]:
    """The statement lines, each checked to hold only complete double-quoted strings."""
    lines = text.splitlines()
    assert lines[0] == "digraph lineage {" and lines[-1] == "}"
    for line in lines[1:-1]:
        bare = _DOT_STRING.sub("", _DOT_HTML_LABEL.sub("", line))
        assert '"' not in bare and "<" not in bare.replace("->", ""), line
        assert line.endswith(";"), line
    return lines[1:-1]


def _dot_unquote(quoted: str) -> str:
    """What Graphviz shows for a quoted label: ``\\\\`` is a backslash, ``\\n`` a line break."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), quoted[1:-1])


def _dot_attr(line: str, name: str) -> str:
    match = re.search(rf'[ \[]{name}=("(?:[^"\\]|\\.)*")', line)
    assert match is not None, (name, line)
    return _dot_unquote(match.group(1))


def _dot_node(statements: list[str], node_id: str) -> str:
    """The statement of a node, found by its tooltip (the node's id)."""
    shown = node_id.replace("\u2028", "\n")
    matches = [
        line for line in statements if re.match(r"  n\d+ \[", line) and _dot_attr(line, "tooltip") == shown
    ]
    assert len(matches) == 1, node_id
    return matches[0]


def test_dot_draws_every_node_and_edge_with_escaped_labels() -> None:
    graph = _graph(column_edges=False)
    statements = _dot_statements(render(graph, "dot"))
    ids = {node["id"]: f"n{i}" for i, node in enumerate(graph["nodes"])}
    for node in graph["nodes"]:
        line = _dot_node(statements, node["id"])
        assert line.startswith(f"  {ids[node['id']]} [")
        label = _dot_attr(line, "label")
        if node["kind"] == "job":
            shown = node["label"].replace("\u2028", "\n")
            assert "shape=box" in line and label == f"{shown}\n{STATE_STYLES[node['state']].label}"
            assert f'fillcolor="{STATE_STYLES[node["state"]].fill}"' in line
        else:
            assert "shape=cylinder" in line and label == node["label"].replace("\u2028", "\n")
    edges = [line.strip() for line in statements if "->" in line]
    assert edges == [
        f'{ids[e["source"]]} -> {ids[e["target"]]} [tooltip="{e["kind"]}"];' for e in graph["edges"]
    ]
    assert "penwidth=3" in _dot_node(statements, TABLE)


def test_dot_column_edges_use_field_ports_of_table_labels() -> None:
    graph = _graph()
    statements = _dot_statements(render(graph, "dot"))
    report = _dot_node(statements, REPORT)
    assert "shape=plain" in report and '<TD PORT="f0" ALIGN="LEFT">total: string</TD>' in report
    escaped = "we&quot;ird&lt;/script&gt;&lt;!--\\ <BR/>x<BR/>y#quot;`|&amp;: string"
    assert f'<TD PORT="f1" ALIGN="LEFT">{escaped}</TD>' in report
    # "discount" is named only by a column edge: it is added as the table's third port.
    assert '<TD PORT="f2" ALIGN="LEFT">discount</TD>' in _dot_node(statements, TABLE)
    columns = [line.strip().split(" [")[0] for line in statements if "style=dashed" in line]
    assert columns == ["n0:f1:e -> n2:f1:w", "n2:f1:e -> n4:f1:w", "n2:f2:e -> n4:f0:w"]
    assert all(f'color="{COLUMN_EDGE_COLOR}"' in line for line in statements if "style=dashed" in line)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (dot) is not installed")
@pytest.mark.parametrize("column_edges", [True, False])
def test_graphviz_accepts_the_dot_text(column_edges: bool) -> None:
    result = subprocess.run(
        ["dot", "-Tsvg"],
        input=render(_graph(column_edges), "dot"),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stderr == ""
    assert (
        result.stdout.count('class="node"') == 5
        and result.stdout.count('class="edge"') == 4 + 3 * column_edges
    )
    assert "we&quot;ird&lt;/script&gt;&lt;!&#45;&#45;\\" in result.stdout


# --- Mermaid --------------------------------------------------------------------------------------

_MERMAID_LABEL = r'"([^"\n]*)"'
_MERMAID_LINES = [
    re.compile(r"  %% .*"),
    re.compile(rf"  (n\d+)\({_MERMAID_LABEL}\)"),  # job
    re.compile(rf"  (n\d+)\[\({_MERMAID_LABEL}\)\]"),  # dataset
    re.compile(r"  n\d+ (-->|==>) n\d+"),  # data flow, job dependency
    re.compile(rf"  n\d+ -\.->\|{_MERMAID_LABEL}\| n\d+"),
    re.compile(r"  classDef [a-z_]+ [a-z-]+:[#0-9a-z]+(,[a-z-]+:[#0-9a-z]+)*"),
    re.compile(r"  class n\d+(,n\d+)* [a-z_]+"),
]


def _mermaid_lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    for line in lines[1:]:
        assert any(pattern.fullmatch(line) for pattern in _MERMAID_LINES), line
    return lines[1:]


def _mermaid_decode(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label.replace("<br>", "\n"))


def test_mermaid_uses_safe_ids_shapes_and_state_classes() -> None:
    graph = _graph()
    lines = _mermaid_lines(render(graph, "mermaid"))
    shapes = {"job": _MERMAID_LINES[1], "dataset": _MERMAID_LINES[2]}
    for i, node in enumerate(graph["nodes"]):
        [match] = [
            m for line in lines if (m := shapes[node["kind"]].fullmatch(line)) and m.group(1) == f"n{i}"
        ]
        expected = node["label"].replace("\u2028", "\n")
        if node["kind"] == "job":
            expected += "\n" + STATE_STYLES[node["state"]].label
        assert _mermaid_decode(match.group(2)) == expected
    assert [line for line in lines if "-->" in line and "-." not in line] == [
        "  n0 --> n1",
        "  n1 --> n2",
        "  n2 --> n3",
        "  n3 --> n4",
    ]
    column_labels = [
        (line.split()[0], line.split()[-1], _mermaid_decode(m.group(1)))
        for line in lines
        if (m := _MERMAID_LINES[4].fullmatch(line))
    ]
    assert column_labels == [
        ("n0", "n2", "price → price"),
        ("n2", "n4", f"price → {SHOWN}"),
        ("n2", "n4", "discount → total"),
    ]
    assert "  class n1 state_lost" in lines and "  class n3 state_fail" in lines
    assert "  class n0,n2,n4 dataset" in lines and "  class n2 root" in lines
    assert f"  classDef state_lost fill:{STATE_STYLES['LOST'].fill},stroke:{STATE_STYLES['LOST'].stroke}" in (
        "\n".join(lines)
    )


# --- HTML -----------------------------------------------------------------------------------------

_SCRIPT = re.compile(r"<script([^>]*)>(.*?)</script>", flags=re.DOTALL)


def _scripts(page: str) -> list[tuple[str, str]]:
    return _SCRIPT.findall(page)


def test_html_embeds_the_graph_as_inert_json() -> None:
    graph = _graph()
    page = render(graph, "html")
    scripts = _scripts(page)
    # The nasty names add no </script>: the page has its data block, two vendored libraries and its code.
    assert page.count("</script") == len(scripts) == 4
    attributes, data = scripts[0]
    assert attributes == ' id="graph-data" type="application/json"'
    assert "<" not in data and "\u2028" not in data and "\u2029" not in data
    embedded = json.loads(data)
    assert embedded["root"] == TABLE
    assert [node["id"] for node in embedded["graph"]["nodes"]] == [node["id"] for node in graph["nodes"]]
    assert embedded["graph"]["edges"] == graph["edges"]
    assert embedded["graph"]["column_edges"] == graph["column_edges"]
    table = embedded["graph"]["nodes"][2]
    assert table["details"] == graph["nodes"][2]["details"]
    assert table["fields"] == [
        {"name": "order_id", "type": "string"},
        {"name": "price", "type": "string"},
        {"name": "discount", "type": None},
    ]
    assert embedded["styles"]["states"]["LOST"] == STATE_STYLES["LOST"]._asdict()
    assert embedded["styles"]["dataset"] == DATASET_STYLE._asdict()


def test_html_is_self_contained_and_runs_only_its_own_scripts() -> None:
    page = render(_graph(), "html")
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    own = _SCRIPT.sub("", page)
    assert not re.search(r"https?://|//cdn", own)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None and csp.group(1).startswith("default-src 'none'; script-src 'sha256-")
    for attributes, code in _scripts(page)[1:]:
        digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii")
        assert attributes == "" and f"'sha256-{digest}'" in csp.group(1)
    assert "cytoscape" in _scripts(page)[1][1] and "dagre" in _scripts(page)[2][1]
    assert "window.lineageGraph = cy" in _scripts(page)[3][1]


def test_html_title_is_escaped() -> None:
    graph = _graph()
    graph["root"] = REPORT
    title = re.search(r"<title>(.*)</title>", render(graph, "html"))
    assert title is not None
    assert title.group(1).startswith("Lineage of dataset:s3://warehouse/we&quot;ird&lt;/script&gt;&lt;!--")
    assert "\n" not in title.group(1)


# --- the empty graph ------------------------------------------------------------------------------


def test_empty_graph_renders_in_every_format() -> None:
    assert _dot_statements(render(EMPTY, "dot")) == [
        '  graph [rankdir=LR, labelloc=t, fontname=Helvetica, label="Lineage graph (both), generated '
        '2026-11-22T10:00:00Z"];',
        "  node [fontname=Helvetica, fontsize=11];",
        '  edge [color="#64748b", arrowsize=0.7];',
    ]
    assert _mermaid_lines(render(EMPTY, "mermaid")) == [
        "  %% Lineage graph (both), generated 2026-11-22T10:00:00Z"
    ]
    assert json.loads(render(EMPTY, "json")) == EMPTY
    data = json.loads(_scripts(render(EMPTY, "html"))[0][1])
    assert data["root"] is None and data["graph"]["nodes"] == []


def test_job_dependencies_are_drawn_apart_from_the_data_flow() -> None:
    graph = _graph(column_edges=False)
    graph["nodes"].append(_node("job:airflow/dag", "COMPLETE", hops=2))
    graph["edges"].append(
        {"source": "job:airflow/dag", "target": FLINK, "kind": "dependency", "via": "parent"}
    )
    dot = _dot_statements(render(graph, "dot"))
    dependency = [line for line in dot if "->" in line and "dependency" in line]
    assert dependency == ['  n5 -> n1 [tooltip="dependency", style=dotted];']
    assert "  n5 ==> n1" in _mermaid_lines(render(graph, "mermaid"))
    assert sum("==>" in line for line in _mermaid_lines(render(graph, "mermaid"))) == 1
    embedded = json.loads(_scripts(render(graph, "html"))[0][1])
    assert embedded["graph"]["edges"][-1] == {
        "source": "job:airflow/dag",
        "target": FLINK,
        "kind": "dependency",
        "via": "parent",
    }


def test_datasets_are_coloured_by_their_health() -> None:
    graph = _graph()
    graph["nodes"][0]["health"] = "failing"
    graph["nodes"][4]["health"] = "late"
    graph["nodes"][2]["health"] = "ok"
    lines = _mermaid_lines(render(graph, "mermaid"))
    assert "  class n0 dataset_failing" in lines and "  class n4 dataset_late" in lines
    assert "  class n2 dataset" in lines
    failing, late = HEALTH_STYLES["failing"], HEALTH_STYLES["late"]
    assert f"  classDef dataset_failing fill:{failing.fill},stroke:{failing.stroke},color:#111827" in lines
    plain = render(_graph(), "dot")
    dot = render(graph, "dot")
    assert dot.count(failing.fill) == plain.count(failing.fill) + 1  # the job that failed has that fill too
    assert late.fill not in plain and dot.count(late.fill) == 1
    page = render(graph, "html")
    assert '"health": {"failing": {"label": "failing"' in page and '"health": "late"' in page
