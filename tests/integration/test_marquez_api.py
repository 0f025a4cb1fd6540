"""Marquez compatibility of the read API, on the lake the real pipeline builds from the lab's events (the
session's ``lab_pipeline``; one ``lineage serve`` process for this module):

- every Marquez read path we answer, its response validated against Marquez's OpenAPI document
  (``../shared/specs/marquez-openapi-0.51.1.yml``, component schemas, OpenAPI 3.0 rules), and its content
  checked against what the lab's events hold;
- every read call of marquez-python 0.50.0 (Marquez's own client, from PyPI), each asserting real content.

The document is read as published, with the corrections listed in ``SPEC_CORRECTIONS`` where it contradicts
itself or what Marquez answers; each says why.
"""

from __future__ import annotations

import copy
import functools
import os
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
import yaml
from marquez_client import MarquezClient
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from tests.fixtures.pipeline import Pipeline
from tests.integration.test_read_api import INGESTION, KAFKA, SPARK_OVERWRITE, WAREHOUSE, ReadService, serving

pytestmark = pytest.mark.integration

SPEC_NAME = "marquez-openapi-0.51.1.yml"


def _spec_path() -> Path:
    """Marquez's OpenAPI document (a data file beside the project, not part of it): ``LINEAGE_MARQUEZ_SPEC``,
    else ``../shared/specs/`` next to this checkout, else next to the checkout it was cloned from (a local
    clone, as the fresh-clone check makes)."""
    if os.environ.get("LINEAGE_MARQUEZ_SPEC"):
        return Path(os.environ["LINEAGE_MARQUEZ_SPEC"])
    repo = Path(__file__).resolve().parents[2]
    candidates = [repo.parent / "shared" / "specs" / SPEC_NAME]
    origin = subprocess.run(
        ["git", "-C", str(repo), "config", "--get", "remote.origin.url"], capture_output=True, text=True
    ).stdout.strip()
    if origin and Path(origin).is_dir():
        candidates.append(Path(origin).resolve().parent / "shared" / "specs" / SPEC_NAME)
    return next((c for c in candidates if c.is_file()), candidates[0])


SPEC = _spec_path()
SPEC_URI = "urn:marquez-openapi-0.51.1"
STATS = ("lineage-events", "jobs", "datasets", "sources")
STUCK_JOB = ("fh-local", "supplier-stats")
CREATE_TABLE = "supplier_stats_app.create_table_default_supplier_stats"
STATS_TABLE = (WAREHOUSE, "default.db/supplier_stats")
ORDERS_TABLE = (WAREHOUSE, "default.db/orders")


def _nullable(node: Any) -> Any:
    """Every typed schema also takes null: Marquez writes null for an absent value (``description``,
    ``endedAt``, ``latestRun`` ...) where the document, OpenAPI 3.0, would need ``nullable: true``."""
    if isinstance(node, dict):
        out = {k: _nullable(v) for k, v in node.items() if not (k == "type" and v is None)}  # ``type:`` empty
        if isinstance(out.get("type"), str):
            out["nullable"] = True
        return out
    if isinstance(node, list):
        return [_nullable(v) for v in node]
    return node


# Where the document contradicts itself or Marquez's answers: (schema, path to the keyword, value, why).
SPEC_CORRECTIONS: tuple[tuple[str, tuple[str, ...], Any, str], ...] = (
    (
        "DatasetVersion",
        ("properties", "tags"),
        {"type": "array", "items": {"type": "string"}},
        "typed string, but its own example and Dataset's tags are a list of names",
    ),
    (
        "FacetsResult",
        ("properties", "facets"),
        {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/CustomFacet"}},
        "one facet as written; a run's facets are a map of them, as RunFacets",
    ),
    (
        "Run",
        ("allOf",),
        None,
        "anyOf its two parts lets anything through the second (no required field, nothing about state or "
        "times); a run Marquez answers has both, so both are checked",
    ),
    (
        "GraphNode",
        ("properties", "data"),
        {"type": "object"},
        "oneOf Dataset/Job matches both (neither requires a field); checked by node type instead, as its "
        "discriminator means (see graph_node)",
    ),
)


@functools.cache
def registry() -> Registry:
    if not SPEC.is_file():
        pytest.skip(f"Marquez's OpenAPI document is not at {SPEC}")
    spec = _nullable(yaml.safe_load(SPEC.read_text()))
    schemas = spec["components"]["schemas"]
    for name, path, value, _why in SPEC_CORRECTIONS:
        target = schemas[name]
        if path == ("allOf",):  # anyOf -> allOf
            target["allOf"] = target.pop("anyOf")
            continue
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = _nullable(copy.deepcopy(value))
    return Registry().with_resource(SPEC_URI, Resource.from_contents(spec, default_specification=DRAFT4))


def check(name: str, instance: Any) -> Any:
    """``instance`` valid against the document's schema ``name`` (raises with the first error)."""
    schema = {"$ref": f"{SPEC_URI}#/components/schemas/{name}"}
    validator = OAS30Validator(schema, registry=registry(), format_checker=oas30_format_checker)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    assert not errors, f"{name}: {errors[0].message} at {list(errors[0].absolute_path)}"
    return instance


def graph_node(node: dict[str, Any]) -> None:
    check("GraphNode", node)
    check({"DATASET": "Dataset", "JOB": "Job"}[node["type"]], node["data"])


@pytest.fixture(scope="module")
def service(lab_pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadService]:
    yield from serving(lab_pipeline, tmp_path_factory.mktemp("marquez_api"))


def q(text: str) -> str:
    return quote(text, safe="")


def get(service: ReadService, path: str, **params: Any) -> Any:
    response = service.get(f"/api/v1{path}", **params)
    assert response.status_code == 200, (path, response.status_code, response.text[:500])
    return response.json()


def test_every_read_path_answers_spec_valid_shapes(service: ReadService) -> None:
    namespaces = check("NamespaceList", get(service, "/namespaces"))
    assert {KAFKA, WAREHOUSE, "fh-local"} <= {n["name"] for n in namespaces["namespaces"]}
    assert check("Namespace", get(service, f"/namespaces/{q(KAFKA)}"))["name"] == KAFKA

    jobs = check("JobList", get(service, "/namespaces/fh-local/jobs"))
    assert SPARK_OVERWRITE[1] in {j["name"] for j in jobs["jobs"]}
    job = check("Job", get(service, f"/namespaces/fh-local/jobs/{q(SPARK_OVERWRITE[1])}"))
    assert isinstance(job["tags"], list)
    assert job["latestRuns"][0]["state"] == "FAILED"  # the failed retry is the latest run
    everywhere = check("JobList", get(service, "/jobs", limit=500))
    assert {INGESTION, SPARK_OVERWRITE, STUCK_JOB} <= {
        (j["namespace"], j["name"]) for j in everywhere["jobs"]
    }
    failed = check("JobList", get(service, "/jobs", lastRunStates="FAILED"))["jobs"]
    assert SPARK_OVERWRITE in {(j["namespace"], j["name"]) for j in failed}
    assert {j["latestRun"]["state"] for j in failed} == {"FAILED"}

    runs = check("RunList", get(service, f"/namespaces/{STUCK_JOB[0]}/jobs/{STUCK_JOB[1]}/runs"))
    stuck = check("Run", get(service, f"/jobs/runs/{runs['runs'][0]['id']}"))
    assert (stuck["state"], stuck["inferredState"]) == ("RUNNING", "LOST")
    inputs = [v["datasetVersionId"] for v in stuck["inputDatasetVersions"]]
    assert [(v["namespace"], v["name"]) for v in inputs] == [(KAFKA, "orders")]
    facets = check("FacetsResult", get(service, f"/jobs/runs/{stuck['id']}/facets", type="run"))
    assert facets["runId"] == stuck["id"]
    assert facets["facets"]["processing_engine"]["name"] == "flink"

    topic = check("Dataset", get(service, f"/namespaces/{q(KAFKA)}/datasets/orders"))
    field_tags = {f["name"]: f["tags"] for f in topic["fields"]}
    # the lab's tags facet on the orders topic, field by field
    assert (field_tags["supplier"], field_tags["price"]) == (["pii=true"], ["confidential=true"])

    datasets = check("DatasetList", get(service, f"/namespaces/{q(WAREHOUSE)}/datasets"))
    assert {ORDERS_TABLE[1], STATS_TABLE[1]} <= {d["name"] for d in datasets["datasets"]}
    stats = check("Dataset", get(service, f"/namespaces/{q(WAREHOUSE)}/datasets/{q(STATS_TABLE[1])}"))
    lineage_of = {c["name"]: c["inputFields"] for c in stats["columnLineage"]}
    assert {"namespace": WAREHOUSE, "dataset": ORDERS_TABLE[1], "field": "price"} in [
        {k: f[k] for k in ("namespace", "dataset", "field")} for f in lineage_of["total_price"]
    ]
    versions = check(
        "DatasetVersionList",
        get(service, f"/namespaces/{q(WAREHOUSE)}/datasets/{q(STATS_TABLE[1])}/versions"),
    )["versions"]
    assert {"supplier", "total_price"} <= {f["name"] for f in versions[0]["fields"]}
    # one version per write, newest first: the overwrite's, then the Spark action's creating the table
    assert [(v["createdByRun"]["jobVersion"]["name"], v["datasetVersionSource"]) for v in versions] == [
        (SPARK_OVERWRITE[1], "run"),
        (CREATE_TABLE, "run"),
    ]
    version = check(
        "DatasetVersion",
        get(
            service,
            f"/namespaces/{q(WAREHOUSE)}/datasets/{q(STATS_TABLE[1])}/versions/{versions[-1]['version']}",
        ),
    )
    created_by = version["createdByRun"]["jobVersion"]
    assert (created_by["namespace"], created_by["name"]) == ("fh-local", CREATE_TABLE)
    # the run that wrote a version names it among its outputs
    assert [v["datasetVersionId"]["version"] for v in version["createdByRun"]["outputDatasetVersions"]] == [
        version["version"]
    ]

    sources = check("SourceList", get(service, "/sources"))["sources"]
    assert {(s["name"], s["type"]) for s in sources} >= {(KAFKA, "KAFKA"), (WAREHOUSE, "S3")}
    assert check("Source", get(service, f"/sources/{q(KAFKA)}"))["connectionUrl"] == KAFKA
    tags = check("TagList", get(service, "/tags"))
    assert all(isinstance(t["name"], str) for t in tags["tags"])

    graph = check("LineageGraph", get(service, "/lineage", nodeId=f"dataset:{KAFKA}:orders", depth=4))[
        "graph"
    ]
    for node in graph:
        graph_node(node)
    assert f"dataset:{WAREHOUSE}:{STATS_TABLE[1]}" in {n["id"] for n in graph}

    total_price = f"datasetField:{WAREHOUSE}:{STATS_TABLE[1]}:total_price"
    columns = get(service, "/column-lineage", nodeId=total_price)["graph"]
    for node in columns:  # the document has no schema for a field node's data (nor DATASET_FIELD in NodeType)
        for edge in node["inEdges"] + node["outEdges"]:
            check("GraphEdge", edge)
            assert edge["origin"] == node["id"]
    by_id = {n["id"]: n for n in columns}
    assert {e["destination"] for e in by_id[total_price]["inEdges"]} == {
        f"datasetField:{WAREHOUSE}:{ORDERS_TABLE[1]}:price"
    }
    assert not any(n["data"]["field"] == "*" for n in columns)

    overwrite = f"/namespaces/fh-local/jobs/{q(SPARK_OVERWRITE[1])}"
    job_versions = check("JobVersionList", get(service, f"{overwrite}/versions"))["versions"]
    # the complete run read the orders table and wrote supplier_stats; the failed retry wrote nothing
    assert sorted(
        (
            [(d["namespace"], d["name"]) for d in v["inputs"]],
            [(d["namespace"], d["name"]) for d in v["outputs"]],
        )
        for v in job_versions
    ) == [([], []), ([ORDERS_TABLE], [STATS_TABLE])]
    for listed in job_versions:
        one = check("JobVersion", get(service, f"{overwrite}/versions/{listed['version']}"))
        assert one == listed and one["latestRun"]["jobVersion"]["version"] == one["version"]
    by_run = {v["latestRun"]["id"]: v["version"] for v in job_versions}
    for run_entry in check("RunList", get(service, f"{overwrite}/runs"))["runs"]:
        assert run_entry["jobVersion"]["version"] == by_run[run_entry["id"]]
    assert job["currentVersion"] == by_run[job["latestRun"]["id"]]
    assert service.get(f"/api/v1{overwrite}/versions/{'0' * 8}-0000-3000-8000-{'0' * 12}").status_code == 404

    complete = next(v["latestRun"]["id"] for v in job_versions if v["outputs"])
    upstream = check("UpstreamRunLineage", get(service, "/runlineage/upstream", runId=complete))["runs"]
    assert upstream[0]["run"]["id"] == complete
    # the overwrite read the orders table the Flink ingestion wrote, which read the topic orders-source wrote
    steps = [(u["job"]["name"], [(i["name"], i["producedByRunId"]) for i in u["inputs"]]) for u in upstream]
    ingestion_run, source_run = upstream[1]["run"]["id"], upstream[2]["run"]["id"]
    assert steps == [
        (SPARK_OVERWRITE[1], [(ORDERS_TABLE[1], ingestion_run)]),
        (INGESTION[1], [("orders", source_run)]),
        ("orders-source", []),
    ]
    shallow = get(service, "/runlineage/upstream", runId=complete, depth=1)["runs"]
    assert [u["run"]["id"] for u in shallow] == [complete, ingestion_run]

    found = check("SearchResultList", get(service, "/search", q="supplier", sort="UPDATE_AT"))
    assert f"dataset:{WAREHOUSE}:{STATS_TABLE[1]}" in {r["nodeId"] for r in found["results"]}

    events = check("LineageEventList", get(service, "/events/lineage", after="2026-11-20T00:00:00Z", limit=5))
    assert len(events["events"]) == 5 and events["totalCount"] >= 25  # the lab's events, and ours
    times = [datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")) for e in events["events"]]
    assert times == sorted(times, reverse=True)  # newest first, Marquez's default


def test_lineage_depth_counts_job_layers_as_marquez(service: ReadService) -> None:
    """From a dataset Marquez starts at the job that writes it; each layer adds every job sharing a dataset
    with the last (readers, writers, siblings) and all their datasets."""

    def ids(depth: int) -> set[str]:
        graph = get(service, "/lineage", nodeId=f"dataset:{KAFKA}:orders", depth=depth)["graph"]
        return {n["id"] for n in graph}

    source = "job:fh-local:orders-source"
    readers = {
        "job:fh-local:orders-s3-sink",
        "job:fh-local:supplier-stats",
        f"job:{INGESTION[0]}:{INGESTION[1]}",
    }
    overwrite, create = f"job:fh-local:{SPARK_OVERWRITE[1]}", f"job:fh-local:{CREATE_TABLE}"
    assert ids(0) == {source, f"dataset:{KAFKA}:orders"}
    one = ids(1)
    assert readers | {f"dataset:{WAREHOUSE}:{ORDERS_TABLE[1]}"} <= one and overwrite not in one
    two = ids(2)
    assert {overwrite, f"dataset:{WAREHOUSE}:{STATS_TABLE[1]}"} <= two and create not in two
    assert create in ids(3)  # a sibling: it writes what the overwrite writes
    boundary = get(service, "/lineage", nodeId=f"dataset:{KAFKA}:orders", depth=1)["graph"]
    table = next(n for n in boundary if n["id"] == f"dataset:{WAREHOUSE}:{ORDERS_TABLE[1]}")
    assert table["outEdges"] == []  # its reader is beyond the last layer: no edge to it


def test_statistics_count_what_the_lake_holds(service: ReadService) -> None:
    """Marquez's dashboard statistics (no schema in the document): 24 hourly or 7 daily buckets."""
    for what in STATS:
        for period, size in (("DAY", 24), ("WEEK", 7)):
            buckets = get(service, f"/stats/{what}", period=period, timezone="UTC")
            assert len(buckets) == size
            assert all({"startInterval", "endInterval"} <= set(b) for b in buckets)
    jobs = get(service, "/stats/jobs", period="WEEK", timezone="UTC")
    # the lab's jobs were first seen on 2026-11-20; ours during this session: all there by the last day
    assert jobs[-1]["count"] >= 8
    events = get(service, "/stats/lineage-events", period="DAY", timezone="UTC")
    # our own jobs reported runs during this session: their STARTs are in the last day's buckets
    assert sum(b["start"] for b in events) >= 1
    assert service.get("/api/v1/stats/jobs").status_code == 400  # period is required


def test_paging_and_writes(service: ReadService) -> None:
    empty = get(service, "/namespaces", limit=0)
    assert empty["namespaces"] == [] and empty["totalCount"] >= 6
    refused = requests.put(f"{service.url}/api/v1/namespaces/etl", json={"ownerName": "me"}, timeout=10)
    assert refused.status_code == 405
    assert refused.json()["error"]["code"] == "READ_ONLY"


def test_every_read_call_of_marquez_python(service: ReadService) -> None:
    client = MarquezClient(service.url)
    assert KAFKA in {n["name"] for n in client.list_namespaces()["namespaces"]}
    assert client.get_namespace("fh-local")["name"] == "fh-local"

    assert KAFKA in {s["name"] for s in client.list_sources()["sources"]}
    assert client.get_source(WAREHOUSE)["type"] == "S3"

    assert "orders" in {d["name"] for d in client.list_datasets(KAFKA)["datasets"]}
    stats = client.get_dataset(*STATS_TABLE)
    assert {"supplier", "total_price"} <= {f["name"] for f in stats["fields"]}
    versions = client.list_dataset_versions(*STATS_TABLE)["versions"]
    assert versions and versions[0]["name"] == STATS_TABLE[1]
    version = client.get_dataset_version(*STATS_TABLE, versions[0]["version"])
    assert {f["name"] for f in version["fields"]} == {f["name"] for f in versions[0]["fields"]}

    assert SPARK_OVERWRITE[1] in {j["name"] for j in client.list_jobs("fh-local")["jobs"]}
    job = client.get_job(*SPARK_OVERWRITE)
    assert job["outputs"] == [{"namespace": WAREHOUSE, "name": STATS_TABLE[1]}]
    runs = client.list_job_runs(*SPARK_OVERWRITE)["runs"]
    assert {r["state"] for r in runs} == {"COMPLETED", "FAILED"}  # the first attempt and its failed retry
    failed = client.get_job_run(next(r["id"] for r in runs if r["state"] == "FAILED"))
    assert failed["errorMessage"]

    by_field = client.get_column_lineage_by_dataset_field(*STATS_TABLE, "total_price")["graph"]
    price = f"datasetField:{WAREHOUSE}:{ORDERS_TABLE[1]}:price"
    assert price in {n["id"] for n in by_field}
    by_dataset = client.get_column_lineage_by_dataset(*STATS_TABLE)["graph"]
    assert {n["id"] for n in by_field} <= {n["id"] for n in by_dataset}
    by_job = client.get_column_lineage_by_job(*SPARK_OVERWRITE)["graph"]
    assert f"datasetField:{WAREHOUSE}:{STATS_TABLE[1]}:total_price" in {n["id"] for n in by_job}
    versioned = client.get_column_lineage_by_dataset_field(
        *STATS_TABLE, "total_price", version=versions[0]["version"]
    )["graph"]
    assert price in {n["id"] for n in versioned}

    assert isinstance(client.list_tags()["tags"], list)
    events = client.list_events(limit=3)
    assert len(events["events"]) == 3 and events["totalCount"] >= 25
    lab = client.list_events(namespace="fh-local")["events"]
    assert lab and {e["job"]["namespace"] for e in lab} == {"fh-local"}
