"""The terminal event ``lineage close-run`` sends for a stuck run (the lab's jq + curl step, done right)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import RunFacet, error_message_run

from lineage.observe import PRODUCER, RunRef, parent_facet


def close_event(run: dict[str, Any], state: str, reason: str | None) -> RunEvent:
    """An ABORT/FAIL event for ``run`` (a ``lake.lineage.runs`` row): same run id, job and parent."""
    facets: dict[str, RunFacet] = {}
    message = reason or f"closed by `lineage close-run`: {run.get('liveness_reason') or 'no reason given'}"
    error = error_message_run.ErrorMessageRunFacet(message=message, programmingLanguage="NONE")
    facets["errorMessage"] = error
    if run.get("parent_run_id") and run.get("parent_job_namespace") and run.get("parent_job_name"):
        parent = RunRef(run["parent_job_namespace"], run["parent_job_name"], run["parent_run_id"])
        root = None
        if run.get("root_run_id") and run.get("root_job_namespace") and run.get("root_job_name"):
            root = RunRef(run["root_job_namespace"], run["root_job_name"], run["root_run_id"])
        facets["parent"] = parent_facet(parent, root)
    return RunEvent(
        eventType=RunState(state),
        eventTime=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        run=Run(runId=run["run_id"], facets=facets),
        job=Job(namespace=run["job_namespace"], name=run["job_name"]),
        producer=PRODUCER,
    )
