"""Run the real dbt and Airflow producers (their own venvs, .venv-dbt and .venv-airflow) with the OpenLineage
Kafka transport into a given topic, and read their events back.

Used by tests/integration/test_dbt_airflow_producers.py. Installed by ``make producers-setup``
(mk/producers.mk, pins in conf/producers/). Runs in the main venv; dbt and Airflow run as subprocesses.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

REPO = Path(__file__).resolve().parents[2]
DBT_VENV = REPO / ".venv-dbt"
AIRFLOW_VENV = REPO / ".venv-airflow"
DBT_PROJECT = Path(__file__).parent / "dbt" / "shop"
AIRFLOW_DAGS = Path(__file__).parent / "airflow" / "dags"
DBT_NAMESPACE = "dbt-shop"  # OPENLINEAGE_NAMESPACE: the namespace of dbt's jobs
# `dbt-ol test` runs as its own job in its own namespace, so the run's events stay as they were.
DBT_TEST_NAMESPACE = "dbt-shop-tests"
DBT_TEST_JOB = "dbt-test-shop"  # OPENLINEAGE_DBT_JOB_NAME of the test invocation
AIRFLOW_NAMESPACE = "airflow-shop"  # [openlineage] namespace: the namespace of Airflow's jobs
DAG_ID = "ol_shop"
LOGICAL_DATE = "2026-11-20"

Event = dict[str, Any]


def kafka_transport(bootstrap: str, topic: str) -> dict[str, Any]:
    """The openlineage-python Kafka transport; a short message timeout so an unreachable broker fails fast."""
    return {
        "type": "kafka",
        "topic": topic,
        "config": {"bootstrap.servers": bootstrap, "message.timeout.ms": "20000"},
    }


def _clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """Our environment without any OpenLineage, Airflow or dbt setting of the test process (parent ids,
    transports), with ``venv``'s bin/ first on PATH (dbt-ol runs ``dbt`` from PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "AIRFLOW", "DBT_"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in ok:
        raise RuntimeError(
            f"{' '.join(cmd)} exited with {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    return done.stdout + done.stderr


def run_dbt(work: Path, bootstrap: str, topic: str) -> str:
    """`dbt seed` (no OpenLineage), `dbt-ol run`, then `dbt-ol test` (one passing and one failing test, so dbt
    exits with 1) on a copy of the shop project; returns dbt-ol's logs."""
    project = work / "shop"
    shutil.copytree(DBT_PROJECT, project)
    config = project / "openlineage.yml"
    config.write_text(json.dumps({"transport": kafka_transport(bootstrap, topic)}))
    env = _clean_env(
        DBT_VENV,
        DBT_PROFILES_DIR=str(project),
        DO_NOT_TRACK="1",
        OPENLINEAGE_CONFIG=str(config),
        OPENLINEAGE_NAMESPACE=DBT_NAMESPACE,
    )
    bin_dir = DBT_VENV / "bin"
    _run([str(bin_dir / "dbt"), "seed"], project, env, timeout=300)
    log = _run([str(bin_dir / "dbt-ol"), "run"], project, env, timeout=300)
    env.update(OPENLINEAGE_NAMESPACE=DBT_TEST_NAMESPACE, OPENLINEAGE_DBT_JOB_NAME=DBT_TEST_JOB)
    return log + _run([str(bin_dir / "dbt-ol"), "test"], project, env, timeout=300, ok=(1,))


def run_airflow(work: Path, bootstrap: str, topic: str) -> str:
    """`airflow dags test ol_shop` on a fresh SQLite metadata database; returns its log."""
    home = work / "airflow"
    dags = home / "dags"
    shutil.copytree(AIRFLOW_DAGS, dags)
    shop_db = work / "shop.sqlite"
    env = _clean_env(
        AIRFLOW_VENV,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__OPENLINEAGE__NAMESPACE=AIRFLOW_NAMESPACE,
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(kafka_transport(bootstrap, topic)),
        AIRFLOW_CONN_SHOP_SQLITE=json.dumps({"conn_type": "sqlite", "host": str(shop_db)}),
    )
    airflow = str(AIRFLOW_VENV / "bin" / "airflow")
    _run([airflow, "db", "migrate"], work, env, timeout=300)
    return _run([airflow, "dags", "test", DAG_ID, LOGICAL_DATE], work, env, timeout=600)


def read_topic(
    bootstrap: str, topic: str, partitions: int, idle: float = 5.0
) -> list[tuple[int, int, Event]]:
    """Every event in ``topic`` as (partition, offset, event), read until nothing new came for ``idle`` s."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[tuple[int, int, Event]] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            assert value is not None
            seen.append((message.partition() or 0, message.offset() or 0, json.loads(value)))
            last = time.monotonic()
    finally:
        consumer.close()
    return sorted(seen, key=lambda s: (s[0], s[1]))


def _task_ids(value: Any) -> list[str]:
    """The Airflow task facet's upstream/downstream ids: a JSON list, or a string holding a JSON list or a
    Python list repr (``"['load_raw']"``), depending on the provider version."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = ast.literal_eval(value)
    return [str(v) for v in value]


def airflow_task_dependencies(events: list[Event]) -> set[tuple[tuple[str, str], tuple[str, str]]]:
    """The (upstream job, downstream job) pairs of the captured task events, from the ``airflow`` run facet
    (``task.upstream_task_ids`` / ``downstream_task_ids``), with jobs as (namespace, ``<dag>.<task>``)."""
    pairs: set[tuple[tuple[str, str], tuple[str, str]]] = set()
    for event in events:
        facet = event.get("run", {}).get("facets", {}).get("airflow")
        if not facet or "task" not in facet:
            continue
        namespace = event["job"]["namespace"]
        dag = facet["dag"]["dag_id"]
        me = (namespace, f"{dag}.{facet['task']['task_id']}")
        for task in _task_ids(facet["task"].get("upstream_task_ids")):
            pairs.add(((namespace, f"{dag}.{task}"), me))
        for task in _task_ids(facet["task"].get("downstream_task_ids")):
            pairs.add((me, (namespace, f"{dag}.{task}")))
    return pairs
