"""Every example deployment file under conf/examples/ parses; settings examples are valid settings."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from lineage.settings import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "conf" / "examples"
FILES = sorted(p for p in EXAMPLES.rglob("*") if p.is_file())


def _settings(data: dict[str, Any]) -> Settings:
    return Settings(**data)  # extra="forbid": an unknown key fails


def test_there_are_examples_for_every_platform() -> None:
    folders = {p.parent.name for p in FILES}
    assert {"catalogs", "stores", "kubernetes", "yarn", "emr", "dataproc", "databricks"} <= folders


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_parses(path: Path) -> None:
    text = path.read_text()
    if path.suffix == ".toml":
        _settings(tomllib.loads(text))
    elif path.suffix in (".yaml", ".yml"):
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
        assert documents and all("kind" in d and "apiVersion" in d for d in documents)
        for document in documents:  # settings carried inside a ConfigMap are settings too
            for key, value in (document.get("data") or {}).items():
                if key.endswith(".toml"):
                    _settings(tomllib.loads(value))
    elif path.suffix == ".json":
        assert isinstance(json.loads(text), dict)
    elif path.suffix == ".sh":
        subprocess.run(["bash", "-n", str(path)], check=True)
    elif path.name == "Dockerfile":
        assert text.lstrip().startswith("#") and "\nFROM " in text
    else:
        pytest.fail(f"no check for {path.name}: add one")


def test_spark_operator_files_run_our_jobs() -> None:
    ingest = yaml.safe_load((EXAMPLES / "kubernetes/sparkapplication-ingest.yaml").read_text())
    build = yaml.safe_load((EXAMPLES / "kubernetes/scheduledsparkapplication-build.yaml").read_text())
    assert ingest["kind"] == "SparkApplication" and ingest["spec"]["restartPolicy"]["type"] == "Always"
    assert ingest["spec"]["mainApplicationFile"].endswith("jobs/ingest_events.py")
    assert build["kind"] == "ScheduledSparkApplication" and build["spec"]["concurrencyPolicy"] == "Forbid"
    assert build["spec"]["template"]["mainApplicationFile"].endswith("jobs/build_lineage.py")
