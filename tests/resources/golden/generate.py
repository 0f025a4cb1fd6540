"""Write the golden event files of this folder (run: ``.venv/bin/python tests/resources/golden/generate.py``).

Every event is built with openlineage-python's own models (``openlineage.client.event_v2``/``facet_v2``) and
serialised with its ``Serde``, the same bytes its transports send. Shapes follow what each integration
emits (see README.md here). Fixed ids and times: re-running rewrites identical files.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    error_message_run,
    job_type_job,
    nominal_time_run,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde

from lineage.demo.events import lab_events

HERE = Path(__file__).parent
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
AIRFLOW_PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.8.0"
PYTHON_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def _id(n: int) -> str:
    return str(uuid.UUID(int=0xA11F10 << 64 | n, version=4))


def _ts(at: datetime) -> str:
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _event(state: RunState, at: datetime, run: Run, job: Job, producer: str, **io: list) -> RunEvent:
    return RunEvent(eventType=state, eventTime=_ts(at), run=run, job=job, producer=producer, **io)


def airflow_events() -> list[RunEvent]:
    """A DAG run (parent) with two task runs, as the Airflow OpenLineage provider sends them."""
    engine = processing_engine_run.ProcessingEngineRunFacet(
        version="2.10.5", name="Airflow", openlineageAdapterVersion="2.8.0"
    )
    nominal = nominal_time_run.NominalTimeRunFacet(
        nominalStartTime=_ts(T0), nominalEndTime=_ts(T0 + timedelta(days=1))
    )
    dag_job = Job(
        namespace="airflow",
        name="daily_orders",
        facets={
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="AIRFLOW", jobType="DAG"
            )
        },
    )
    dag_run_id = _id(1)
    dag_facets = {"processing_engine": engine, "nominalTime": nominal}
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=dag_run_id),
        job=parent_run.Job(namespace="airflow", name="daily_orders"),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=dag_run_id),
            job=parent_run.RootJob(namespace="airflow", name="daily_orders"),
        ),
    )
    orders = InputDataset(
        namespace="postgres://db.internal:5432",
        name="shop.public.orders",
        facets={
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[
                    schema_dataset.SchemaDatasetFacetFields(name="id", type="integer"),
                    schema_dataset.SchemaDatasetFacetFields(name="amount", type="numeric"),
                ]
            )
        },
    )
    daily = OutputDataset(namespace="postgres://db.internal:5432", name="shop.public.daily_totals")
    out = [
        _event(
            RunState.START,
            T0 + timedelta(minutes=1),
            Run(runId=dag_run_id, facets=dag_facets),
            dag_job,
            AIRFLOW_PRODUCER,
        )
    ]
    for n, (task, minute) in enumerate((("extract", 2), ("aggregate", 5)), start=2):
        task_job = Job(
            namespace="airflow",
            name=f"daily_orders.{task}",
            facets={
                "jobType": job_type_job.JobTypeJobFacet(
                    processingType="BATCH", integration="AIRFLOW", jobType="TASK"
                ),
                "sql": sql_job.SQLJobFacet(query=f"-- {task}\nSELECT 1"),
            },
        )
        run = Run(
            runId=_id(n), facets={"parent": parent, "processing_engine": engine, "nominalTime": nominal}
        )
        io = {"inputs": [orders], "outputs": [daily]} if task == "aggregate" else {"inputs": [orders]}
        out.append(
            _event(RunState.START, T0 + timedelta(minutes=minute), run, task_job, AIRFLOW_PRODUCER, **io)
        )
        out.append(
            _event(
                RunState.COMPLETE, T0 + timedelta(minutes=minute + 2), run, task_job, AIRFLOW_PRODUCER, **io
            )
        )
    out.append(
        _event(
            RunState.COMPLETE,
            T0 + timedelta(minutes=8),
            Run(runId=dag_run_id, facets=dag_facets),
            dag_job,
            AIRFLOW_PRODUCER,
        )
    )
    return out


def python_events() -> list[RunEvent]:
    """A plain openlineage-python script: START, FAIL with an error, then a retry that completes."""
    job = Job(namespace="python-jobs", name="export_customers")
    source = InputDataset(namespace="file", name="/data/customers.csv")
    target = OutputDataset(namespace="s3://exports", name="customers/2026-11-21.parquet")
    failed, retried = Run(runId=_id(10)), Run(runId=_id(11))
    error = error_message_run.ErrorMessageRunFacet(
        message="PermissionError: s3://exports",
        programmingLanguage="python",
        stackTrace="Traceback (most recent call last): ...",
    )
    return [
        _event(RunState.START, T0, failed, job, PYTHON_PRODUCER, inputs=[source], outputs=[target]),
        _event(
            RunState.FAIL,
            T0 + timedelta(seconds=40),
            Run(runId=failed.runId, facets={"errorMessage": error}),
            job,
            PYTHON_PRODUCER,
            inputs=[source],
            outputs=[target],
        ),
        _event(
            RunState.START,
            T0 + timedelta(minutes=5),
            retried,
            job,
            PYTHON_PRODUCER,
            inputs=[source],
            outputs=[target],
        ),
        _event(
            RunState.COMPLETE,
            T0 + timedelta(minutes=6),
            retried,
            job,
            PYTHON_PRODUCER,
            inputs=[source],
            outputs=[target],
        ),
    ]


def _by_job(prefixes: tuple[str, ...]) -> list[RunEvent]:
    return [e.event for e in lab_events() if e.event.job.name.startswith(prefixes)]


FILES = {
    "flink1.jsonl": lambda: _by_job(("supplier-stats",)),
    "flink2.jsonl": lambda: _by_job(("iceberg-ingestion",)),
    "spark.jsonl": lambda: _by_job(("supplier_stats_app",)),
    "airflow.jsonl": airflow_events,
    "python.jsonl": python_events,
}


def main() -> None:
    for name, build in FILES.items():
        (HERE / name).write_text("".join(Serde.to_json(e) + "\n" for e in build()))
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
