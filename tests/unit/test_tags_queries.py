"""Column tags as read (lineage.query.tags): ``lineage tags``, ``--tag`` in column walks, ``/api/v2/tags`` and
what a scoped key sees, on the small inline model of test_health plus these column edges and tags:

    clean.email --agg--> report.contact     (pii from clean.email's tags facet, one hop)
    clean.key   --agg--> report.total       (finance from the rule ``totals`` on report.total itself)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from lineage.cli.main import Context, cli
from lineage.graph.render import render
from lineage.query.answers import graph_dict
from lineage.query.errors import LookupError_
from lineage.query.model import COLUMN_EDGE_KEY
from lineage.query.nodes import DOWNSTREAM
from lineage.query.tags import tags_of
from lineage.serve.auth import Scope
from lineage.serve.index import IndexedStore
from lineage.serve.scope import scoped_tables
from lineage.settings import Settings, TagRule, TagSettings
from tests.unit.test_health import COLUMN_EDGE_EXTRA, NS, S, _table, ago, picture
from tests.unit.test_read_http import _ask
from tests.unit.test_read_http import settings as http_settings

STEP = pa.struct([("job_namespace", S), ("job_name", S), ("dataset_id", S), ("field", S)])
TAG_FIELDS = [
    ("dataset_id", S), ("field", S), ("tag", S), ("value", S), ("origin_kind", S), ("rule", S),
    ("origin_dataset_id", S), ("origin_field", S), ("hops", pa.int32()), ("path", pa.list_(STEP)),
]  # fmt: skip
RULES = TagSettings(
    rules={
        "totals": TagRule(pattern="^total$", tag="finance"),
        "nothing": TagRule(pattern="^ssn$", tag="pii"),
    }
)


def _tag(
    at: str, tag: str, origin: str, hops: int, path: list[tuple[str, str, str, str]], rule: str | None = None
) -> dict[str, Any]:
    (ds, f), (ods, of) = at.split("."), origin.split(".")
    return {
        "dataset_id": ds, "field": f, "tag": tag, "value": None, "origin_kind": "rule" if rule else "facet",
        "rule": rule, "origin_dataset_id": ods, "origin_field": of, "hops": hops,
        "path": [dict(zip(STEP.names, p, strict=True)) for p in path],
    }  # fmt: skip


TAGS = [
    _tag("clean.email", "pii", "clean.email", 0, []),
    _tag("report.contact", "pii", "clean.email", 1, [(NS, "agg", "report", "contact")]),
    _tag("report.total", "finance", "report.total", 0, [], rule="totals"),
]


def tagged_store() -> IndexedStore:
    base = picture()
    tables = dict(base._tables)
    tables["column_edges"] = _table(
        [
            {"source_dataset_id": "clean", "source_field": src, "target_dataset_id": "report",
             "target_field": tgt, "job_namespace": NS, "job_name": "agg", "transformations": [],
             "subtypes": [], "is_direct": True, "first_seen": ago(100)}
            for src, tgt in (("email", "contact"), ("key", "total"))
        ],
        [(c, S) for c in COLUMN_EDGE_KEY] + COLUMN_EDGE_EXTRA,
    )  # fmt: skip
    tables["column_tags"] = _table(TAGS, TAG_FIELDS)
    datasets = tables["datasets"]
    own = [
        [{"key": "environment", "value": "prod"}] if d == "report" else None
        for d in datasets["dataset_id"].to_pylist()
    ]
    tags_type = pa.list_(pa.struct([("key", S), ("value", S), ("source", S)]))
    tables["datasets"] = datasets.append_column("tags", pa.array(own, tags_type))
    return IndexedStore(Settings(tags=RULES), tables)


def test_the_tags_of_a_dataset_come_with_their_origin_and_path() -> None:
    data = tags_of(tagged_store(), "s3://lake/report")
    assert data["dataset"]["label"] == "s3://lake/report"
    assert [(t["field"], t["tag"], t["origin"], t["hops"], t["path"]) for t in data["tags"]] == [
        (
            "contact",
            "pii",
            {"kind": "facet", "rule": None, "dataset": "s3://lake/clean", "field": "email"},
            1,
            [{"job": "etl/agg", "dataset": "s3://lake/report", "field": "contact"}],
        ),
        (
            "total",
            "finance",
            {"kind": "rule", "rule": "totals", "dataset": "s3://lake/report", "field": "total"},
            0,
            [],
        ),
    ]
    assert data["unmatched_rules"] == [{"rule": "nothing", "pattern": "^ssn$"}]
    assert data["dataset_tags"] == [
        {"key": "environment", "value": "prod"}
    ]  # the dataset's own, not its columns'


def test_field_and_tag_filters_keep_only_what_matches() -> None:
    s = tagged_store()
    assert [t["field"] for t in tags_of(s, "s3://lake/report", tag="PII")["tags"]] == ["contact"]
    assert [t["tag"] for t in tags_of(s, "s3://lake/report", field="total")["tags"]] == ["finance"]
    assert tags_of(s, "s3://lake/report", tag="pii=yes")["tags"] == []
    with pytest.raises(LookupError_, match="is a job"):
        tags_of(s, "job:etl/agg")


def test_a_column_walk_with_a_tag_keeps_only_the_columns_carrying_it() -> None:
    s = tagged_store()
    walk = s.traverse(s.resolve("s3://lake/clean"), DOWNSTREAM, None, columns=True)
    assert {f.field for f in walk.columns} == {"contact", "total"}
    kept = s.keep_tagged(walk, [("pii", None)])
    assert {(f.dataset.name, f.field) for f in kept.columns} == {("report", "contact")}
    assert [(e["source_field"], e["target_field"]) for e in kept.column_edges] == [("email", "contact")]
    assert any(n.name == "report" for n in kept.hops)  # the dataset of a tagged column stays


def test_the_tags_command_prints_each_tag_and_warns_of_a_rule_matching_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = tagged_store()
    monkeypatch.setattr(Context, "store", property(lambda _self: s))
    text = CliRunner().invoke(cli, ["tags", "s3://lake/report"])
    assert text.exit_code == 0, text.output
    assert "contact  pii" in text.output and "s3://lake/clean.email" in text.output
    assert "etl/agg -> s3://lake/report.contact" in text.output
    assert "warning: tag rule nothing (pattern '^ssn$') matches no field in the lake" in text.output
    as_json = CliRunner().invoke(cli, ["tags", "s3://lake/report", "--tag", "finance", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert [t["field"] for t in json.loads(as_json.output)["tags"]] == ["total"]


def test_the_read_api_answers_tags_as_the_cli(tmp_path: Path) -> None:
    s = tagged_store()
    [(status, answer), (missing, _)] = asyncio.run(
        _ask(
            http_settings(tmp_path),
            s,
            ("/api/v2/tags?dataset=s3://lake/report&tag=pii", {}),
            ("/api/v2/tags?dataset=s3://lake/nowhere", {}),
        )
    )
    assert status == 200 and answer["tags"] == tags_of(s, "s3://lake/report", tag="pii")["tags"]
    assert missing == 404


def test_a_scoped_key_sees_no_tag_that_came_through_a_hidden_name() -> None:
    tables = dict(tagged_store()._tables)
    tables["column_tags"] = _table(
        [
            *TAGS,
            _tag(
                "report.contact", "pii", "vault.ssn", 1, [(NS, "agg", "report", "contact")]
            ),  # hidden origin
            _tag("report.total", "pii", "clean.key", 1, [("secret", "agg", "report", "total")]),  # hidden job
        ],
        TAG_FIELDS,
    )
    seen = scoped_tables(tables, Scope(("s3://lake", NS)))["column_tags"].to_pylist()
    assert sorted((r["dataset_id"], r["field"], r["origin_dataset_id"]) for r in seen) == [
        ("clean", "email", "clean"),
        ("report", "contact", "clean"),
        ("report", "total", "report"),
    ]


def test_the_graph_gives_each_dataset_its_columns_tags() -> None:
    s = tagged_store()
    walk = s.traverse(s.resolve("s3://lake/clean"), DOWNSTREAM, None, columns=True)
    nodes = {n["id"]: n for n in graph_dict(s, walk)["nodes"]}
    assert nodes["dataset:s3://lake/report"]["column_tags"] == {"contact": ["pii"], "total": ["finance"]}
    assert nodes["dataset:s3://lake/clean"]["column_tags"] == {"email": ["pii"]}
    assert "column_tags" not in nodes["job:etl/agg"]
    page = render(graph_dict(s, walk), "html")
    assert '"column_tags"' in page and "owner.column_tags[name]" in page
