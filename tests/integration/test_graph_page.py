"""The HTML lineage page in Debian's headless Chromium: offline, coloured by run state, clickable, columns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineage.graph.render import DATASET_STYLE, HEALTH_STYLES, STATE_STYLES, render
from tests.fixtures.browser import Browser, open_page

pytestmark = [pytest.mark.integration, pytest.mark.browser]

TOPIC = "dataset:kafka://kafka-1:19092/orders"
FLINK = "job:flink-jobs/orders-to-iceberg"
ORDERS = "dataset:s3://warehouse/lake.db/orders"
SPARK = "job:spark/supplier-stats"
STATS = "dataset:s3://warehouse/lake.db/supplier_stats"
EXPORT = "job:airflow/export-stats"
PG = "dataset:postgres://db:5432/shop.public.supplier_stats"


def _node(node_id: str, hops: int, state: str | None = None, **extra: Any) -> dict[str, Any]:
    kind, _, rest = node_id.partition(":")
    # The namespace is a URI (scheme://authority) or a plain word; the name is the rest.
    scheme, _, path = rest.rpartition("://")
    namespace, _, name = path.partition("/")
    return {
        "id": node_id,
        "kind": kind,
        "namespace": f"{scheme}://{namespace}" if scheme else namespace,
        "name": name,
        "label": name,
        "state": state,
        "hops": hops,
        "details": extra.get("details", {}),
        "fields": [{"name": field, "type": type_} for field, type_ in extra.get("fields", [])],
        **({"health": extra["health"]} if "health" in extra else {}),
    }


def _column(source: str, source_field: str, target: str, target_field: str, job: str) -> dict[str, Any]:
    return {
        "source": source,
        "source_field": source_field,
        "target": target,
        "target_field": target_field,
        "transformation": "DIRECT/IDENTITY",
        "job": job,
    }


ORDER_FIELDS = [("order_id", "bigint"), ("supplier", "string"), ("price", "double")]
STATS_FIELDS = [("supplier", "string"), ("total_price", "double")]
GRAPH: dict[str, Any] = {
    "root": ORDERS,
    "direction": "both",
    "generated_at": "2026-11-22T10:00:00Z",
    "nodes": [
        _node(TOPIC, 2, fields=ORDER_FIELDS),
        _node(FLINK, 1, "LOST", details={"latest run": "0192aaaa-lost", "last event": "RUNNING"}),
        _node(ORDERS, 0, fields=ORDER_FIELDS, details={"aliases": ["s3a://warehouse/lake.db/orders/"]}),
        _node(SPARK, 1, "FAIL", details={"latest run": "0192bbbb-fail", "error": "OutOfMemoryError"}),
        _node(STATS, 2, fields=STATS_FIELDS, health="failing"),
        _node(EXPORT, 3, "COMPLETE", details={"latest run": "0192cccc-done"}),
        _node(PG, 4, fields=STATS_FIELDS),
    ],
    "edges": [
        {"source": TOPIC, "target": FLINK, "kind": "input"},
        {"source": FLINK, "target": ORDERS, "kind": "output"},
        {"source": ORDERS, "target": SPARK, "kind": "input"},
        {"source": SPARK, "target": STATS, "kind": "output"},
        {"source": STATS, "target": EXPORT, "kind": "input"},
        {"source": EXPORT, "target": PG, "kind": "output"},
    ],
    "column_edges": [
        *(_column(TOPIC, name, ORDERS, name, FLINK) for name, _ in ORDER_FIELDS),
        _column(ORDERS, "supplier", STATS, "supplier", SPARK),
        dict(_column(ORDERS, "price", STATS, "total_price", SPARK), transformation="DIRECT/AGGREGATION"),
        *(_column(STATS, name, PG, name, EXPORT) for name, _ in STATS_FIELDS),
    ],
}


def _rgb(hex_colour: str) -> str:
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red},{green},{blue})"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    html = tmp_path / "graph.html"
    html.write_text(render(GRAPH, "html"), encoding="utf-8")
    with open_page(html) as session:
        yield session


def test_graph_page_offline_states_details_and_columns(browser: Browser, tmp_path: Path) -> None:
    page = browser.page
    ids = {node["id"] for node in GRAPH["nodes"]}
    assert set(browser.js("(cy) => cy.nodes().map((n) => n.id())")) == ids
    assert browser.js("(cy) => cy.edges().length") == len(GRAPH["edges"])
    assert page.locator("#title").inner_text() == "Lineage of lake.db/orders"
    assert "2026-11-22T10:00:00Z" in page.locator("#subtitle").inner_text()

    # Jobs are coloured by the state of their latest run, datasets have another shape.
    colours = browser.js(
        "(cy, ids) => ids.map((id) => cy.getElementById(id).style('background-color'))",
        [FLINK, SPARK, EXPORT],
    )
    assert colours == [_rgb(STATE_STYLES[state].fill) for state in ("LOST", "FAIL", "COMPLETE")]
    assert len(set(colours)) == 3
    # Datasets are coloured by their own health: a failing one as such, one without a problem plainly.
    dataset_colours = browser.js(
        "(cy, ids) => ids.map((id) => cy.getElementById(id).style('background-color'))", [STATS, TOPIC]
    )
    assert dataset_colours == [_rgb(HEALTH_STYLES["failing"].fill), _rgb(DATASET_STYLE.fill)]
    shapes = browser.js("(cy, ids) => ids.map((id) => cy.getElementById(id).style('shape'))", [FLINK, ORDERS])
    assert shapes[0] != shapes[1]
    # dagre's layers run left to right along the lineage.
    xs = browser.js(
        "(cy, ids) => ids.map((id) => cy.getElementById(id).position('x'))", [TOPIC, FLINK, ORDERS, SPARK]
    )
    assert xs == sorted(xs) and len(set(xs)) == 4

    assert "Nothing selected" in page.locator("#details").inner_text()
    browser.click_node(SPARK)
    details = page.locator("#details").inner_text()
    assert "supplier-stats" in details and "0192bbbb-fail" in details and "OutOfMemoryError" in details
    assert browser.js("(cy) => cy.$(':selected').map((n) => n.id())") == [SPARK]

    page.locator("#columns-toggle").click()
    browser.wait_ready()
    fields = browser.js(
        "(cy) => cy.nodes('[kind = \"field\"]').map((n) => [n.data('dataset'), n.data('name')])"
    )
    expected_fields = [[node["id"], field["name"]] for node in GRAPH["nodes"] for field in node["fields"]]
    assert sorted(fields) == sorted(expected_fields)
    column_edges = browser.js(
        """(cy) => cy.edges('[kind = "column"]').map((e) =>
             [e.source(), e.target()].flatMap((field) => [field.data('dataset'), field.data('name')]))"""
    )
    assert sorted(column_edges) == sorted(
        [e["source"], e["source_field"], e["target"], e["target_field"]] for e in GRAPH["column_edges"]
    )
    # Each field row lies inside its dataset's box; the jobs are still drawn.
    outside = browser.js(
        """(cy) => cy.nodes('[kind = "field"]').filter((f) => {
             const box = cy.getElementById(f.data('dataset')).boundingBox();
             const p = f.position();
             return p.x < box.x1 || p.x > box.x2 || p.y < box.y1 || p.y > box.y2;
           }).length"""
    )
    assert outside == 0
    assert browser.js("(cy) => cy.nodes('[kind = \"job\"]').length") == 3

    price = browser.js(
        "(cy, dataset) => cy.nodes('[kind = \"field\"]')"
        ".filter((f) => f.data('dataset') === dataset && f.data('name') === 'total_price').id()",
        STATS,
    )
    browser.click_node(price)
    assert "lake.db/orders.price (DIRECT/AGGREGATION)" in page.locator("#details").inner_text()

    screenshot = tmp_path / "graph.png"
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 20_000
    assert browser.blocked == []
    assert browser.errors == []


def test_a_diffs_page_colours_what_appeared_and_what_stopped(tmp_path: Path) -> None:
    from lineage.graph.render import ADDED_COLOR, REMOVED_COLOR
    from lineage.query import answers
    from lineage.query.diff import diff, windows
    from tests.unit.test_query_diff import NOW, store

    s = store()
    base, current = windows(now=NOW)
    html = tmp_path / "diff.html"
    html.write_text(render(answers.diff_graph(s, diff(s, base, current)), "html"), encoding="utf-8")
    with open_page(html) as session:
        lines = session.js(
            """(cy) => cy.edges().map((e) => [e.source().id(), e.target().id(), e.style('line-color'),
                 e.style('line-style')])"""
        )
        legend = session.page.locator("#legend-items").inner_text()
        assert session.errors == [] and session.blocked == []
    added, removed = (_rgb(c) for c in (ADDED_COLOR, REMOVED_COLOR))
    assert sorted(lines) == [
        ["dataset:ns/prices", "job:etl/load", added, "solid"],
        ["job:etl/new", "dataset:ns/archive", added, "solid"],
        ["job:etl/new", "dataset:ns/summary", added, "solid"],
        ["job:etl/old", "dataset:ns/legacy", removed, "dashed"],
        ["job:etl/report", "dataset:ns/summary", removed, "dashed"],
    ]
    assert "appeared" in legend and "stopped being observed" in legend
