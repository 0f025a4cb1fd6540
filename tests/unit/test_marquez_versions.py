"""Marquez's dataset versions answered from the write versions (lineage.serve.marquez over
lineage.query.history), on the inline model of test_query_history, shapes checked against Marquez's
OpenAPI document."""

from __future__ import annotations

import pytest

from lineage.query.errors import UnknownNode
from lineage.query.versions import upstream_runs
from lineage.serve import marquez
from tests.integration.test_marquez_api import SPEC, check
from tests.unit.test_query_history import at, run_id, store

pytestmark = pytest.mark.skipif(not SPEC.is_file(), reason=f"Marquez's OpenAPI document not found at {SPEC}")


def wid(version: str) -> str:
    return marquez.write_version_id("orders", version)


def test_a_version_per_write_created_by_its_run() -> None:
    s = store()
    found = [check("DatasetVersion", v) for v in marquez.dataset_versions(s, s.dataset_nodes["orders"])]
    assert [(v["version"], v["datasetVersion"], v["createdByRun"]["id"]) for v in found] == [
        (wid(run_id(6)), run_id(6), run_id(6)),
        (wid("s2"), "s2", run_id(2)),
        (wid("s1"), "s1", run_id(1)),
    ]
    # run 6 reported no schema: the dataset's schema then (run 2's)
    assert [[f["name"] for f in v["fields"]] for v in found] == [["id", "total"], ["id", "total"], ["id"]]
    assert [v["createdByRun"]["state"] for v in found] == ["FAILED", "COMPLETED", "COMPLETED"]
    # the run that made a version names it among its outputs
    assert found[1]["createdByRun"]["outputDatasetVersions"][0]["datasetVersionId"]["version"] == wid("s2")
    assert marquez.version_time(s, s.dataset_nodes["orders"], wid("s1")) == at(12)


def test_runs_name_the_versions_they_read_and_wrote_among_the_listed_ones() -> None:
    s = store()

    def read(n: int) -> str:
        [entry] = check("Run", marquez.run_json(s, s.run(run_id(n))))["inputDatasetVersions"]
        return entry["datasetVersionId"]["version"]

    assert [read(3), read(4)] == [wid("s1"), wid("s2")]
    assert read(5) == wid("s2")  # names a version no write named: the last write before the read
    [wrote] = marquez.run_json(s, s.run(run_id(8)))["outputDatasetVersions"]
    assert wrote["datasetVersionId"]["version"] == wid("s2")  # the compaction rewrote run 2's version
    [start] = marquez.upstream_run_json(s, upstream_runs(s, run_id(3), 0))["runs"]
    assert [(i["version"], i["producedByRunId"]) for i in start["inputs"]] == [(wid("s1"), run_id(1))]


def test_pages_and_one_version() -> None:
    s = store()
    orders = s.dataset_nodes["orders"]
    listed = marquez.versions_page(s, orders, 1, 1)
    assert listed["totalCount"] == 3 and [v["datasetVersion"] for v in listed["versions"]] == ["s2"]
    assert marquez.one_version(s, orders, wid("s1"))["createdByRun"]["id"] == run_id(1)
    with pytest.raises(UnknownNode):
        marquez.one_version(s, orders, marquez.write_version_id("summary", "s1"))
