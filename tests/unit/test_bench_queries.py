"""The CLI query benchmark's choices: which nodes it walks from, and its percentile."""

from __future__ import annotations

import pytest

from benchmarks.queries import (
    _name,
    _readers,
    _upstream_depth,
    answer_size,
    history_questions,
    most_written,
    percentile,
    pick_nodes,
)
from benchmarks.workload import Tier, Workload

TINY = Tier("T", jobs=400, datasets=800, events=8_000, days=1)


def test_hub_is_the_most_read_hub_and_leaf_is_written_never_read_and_deepest() -> None:
    estate = Workload(TINY, 7).estate
    nodes = pick_nodes(estate)
    readers = _readers(estate)
    hub, _ = nodes["hub"]
    assert hub.hub
    assert readers[hub.index] == max(readers.get(d.index, 0) for d in estate.datasets if d.hub)
    leaf, why = nodes["leaf"]
    assert leaf.index not in readers
    assert any(leaf.index in job.outputs for job in estate.jobs)
    depth = _upstream_depth(estate)
    written_unread = {i for job in estate.jobs for i in job.outputs} - set(readers)
    assert depth[leaf.index] == max(depth[i] for i in written_unread) >= 2
    assert f"{depth[leaf.index]} jobs deep" in why


def test_upstream_depth_follows_the_longest_chain_and_survives_cycles() -> None:
    estate = Workload(TINY, 7).estate
    jobs = estate.jobs[:3]
    a, b, c = (d.index for d in estate.datasets[:3])
    for job in estate.jobs:
        job.inputs, job.outputs = [], []
    jobs[0].inputs, jobs[0].outputs = [a], [b]  # a -> b
    jobs[1].inputs, jobs[1].outputs = [b], [c]  # b -> c
    jobs[2].inputs, jobs[2].outputs = [c], [a]  # c -> a: a cycle
    depth = _upstream_depth(estate, limit=12)
    assert depth[b] <= 12 and depth[c] <= 12
    jobs[2].inputs, jobs[2].outputs = [], []
    depth = _upstream_depth(estate)
    assert (depth[a], depth[b], depth[c]) == (0, 1, 2)


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [([1.0], 0.95, 1.0), ([1.0, 2.0], 0.5, 1.5), ([3.0, 1.0, 2.0, 4.0, 5.0], 0.95, 4.8), ([1, 2, 3], 0, 1)],
)
def test_percentile_interpolates(values: list[float], share: float, expected: float) -> None:
    assert percentile(values, share) == pytest.approx(expected)


def test_history_questions_ask_of_the_most_read_and_most_written_datasets_and_the_last_day() -> None:
    estate = Workload(TINY, 7).estate
    written, why = most_written(estate)
    writers = {i: sum(1 for j in estate.jobs if i in j.outputs) for i in range(len(estate.datasets))}
    assert writers[written.index] == max(writers.values()) >= 1
    assert why == f"written by {writers[written.index]} jobs"
    hub, hub_why = pick_nodes(estate)["hub"]
    questions = {q.label: q for q in history_questions(estate)}
    health = questions["health"]
    assert (health.node, health.why, health.args) == ("hub", hub_why, ["health", _name(hub)])
    assert (health.path, health.query) == ("/api/v2/health", {"node": _name(hub)})
    assert (questions["versions"].args, questions["versions"].why) == (["versions", _name(written)], why)
    diff = questions["diff, whole lake"]
    args, path, windows = diff.args, diff.path, diff.query
    # TINY spans one day from 2026-10-01: the window looked at is that day, compared with the week before.
    assert windows == {
        "from": "2026-10-01T00:00:00Z",
        "to": "2026-10-02T00:00:00Z",
        "base_from": "2026-09-24T00:00:00Z",
        "base_to": "2026-10-01T00:00:00Z",
    }
    assert path == "/api/v2/diff"
    assert args == [
        "diff",
        "--from",
        windows["from"],
        "--to",
        windows["to"],
        "--base-from",
        windows["base_from"],
        "--base-to",
        windows["base_to"],
    ]


def test_answer_size_counts_versions_causes_or_every_change() -> None:
    assert answer_size({"dataset": {}, "versions": [1, 2, 3]}) == 3
    assert answer_size({"state": "failing", "causes": [{}, {}]}) == 2
    diff = {
        "window": {"from": "a"},
        "edges": {"appeared": [1], "stopped": [2, 3]},
        "schemas": [4],
        "outcomes": [],
    }
    assert answer_size(diff) == 4
    counted = {**diff, "counts": {"edges": {"appeared": 10, "stopped": 2}, "schemas": 1, "outcomes": 0}}
    assert answer_size(counted) == 13  # every change, listed or not
    assert answer_size([]) == 0
