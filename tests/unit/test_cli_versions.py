"""``lineage versions`` and the versions in ``lineage run`` on the inline model of test_query_history."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lineage.cli import main
from tests.unit.test_query_history import run_id, store


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    s = store()
    monkeypatch.setattr(main.Context, "store", property(lambda _self: s))
    return CliRunner()


def test_versions_lists_each_write_newest_first(runner: CliRunner) -> None:
    result = runner.invoke(main.cli, ["versions", "dataset:ns/orders"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "ns/orders: 3 versions"
    assert lines[1].split()[:3] == ["VERSION", "WRITTEN", "RUN"]
    assert [line.split()[0] for line in lines[2:]] == [run_id(6), "s2", "s1"]
    assert lines[3].split()[1:] == [
        "2026-11-20T08:32:00Z",
        run_id(2),
        "etl/load",
        "COMPLETE",
        "120",
        "2",
        "OVERWRITE",
    ]
    as_json = json.loads(runner.invoke(main.cli, ["versions", "orders", "--json"]).output)
    assert [v["version"] for v in as_json["versions"]] == [run_id(6), "s2", "s1"]


def test_versions_with_a_version_prints_the_chain_upstream(runner: CliRunner) -> None:
    result = runner.invoke(main.cli, ["versions", "summary", "--version", run_id(3)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"ns/summary @ {run_id(3)}  written ")
    assert lines[1] == f"  read ns/orders @ s1  (written by run {run_id(1)})"
    assert lines[2].startswith("  ns/orders @ s1  written ") and lines[2].endswith(
        f"run {run_id(1)} (COMPLETE)"
    )
    assert len(lines) == 3
    shallow = json.loads(
        runner.invoke(
            main.cli, ["versions", "summary", "--version", run_id(3), "--depth", "0", "--json"]
        ).output
    )
    assert [s["depth"] for s in shallow["steps"]] == [0]


def test_an_unknown_version_is_an_error_exit(runner: CliRunner, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main.main(["versions", "orders", "--version", "s7"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "lineage: dataset ns/orders has no version 's7'\n"


def test_run_shows_the_versions_it_read_and_wrote(runner: CliRunner) -> None:
    result = runner.invoke(main.cli, ["run", run_id(4)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    read = lines.index("versions read (1)")
    assert lines[read + 2].split() == ["ns/orders", "s2", run_id(2), "etl/load"]
    written = lines.index("versions written (1)")
    assert lines[written + 2].split() == ["ns/summary", run_id(4), "6", "-", "OVERWRITE"]
    data = json.loads(runner.invoke(main.cli, ["run", run_id(4), "--json"]).output)
    assert [(v["name"], v["version"], v["written_by_run_id"]) for v in data["versions_read"]] == [
        ("orders", "s2", run_id(2))
    ]
    assert [(v["name"], v["version"]) for v in data["versions_written"]] == [("summary", run_id(4))]
