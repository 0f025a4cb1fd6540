"""The Kafka message key OpenLineage's own Kafka transport gives an event.

openlineage-python's ``KafkaTransport._get_message_key`` (1.54.0) keys a message so that the events of one
job, and of a whole parent -> child -> grandchild chain of runs, land in one partition, in order:

- DatasetEvent: ``dataset:<namespace>/<name>``;
- JobEvent: ``job:<namespace>/<name>``;
- RunEvent: ``run:<namespace>/<name>`` of the root job in the parent facet (``run.facets.parent.root.job``)
  when the facet has a root, else of the parent job (``run.facets.parent.job``), else of the event's own
  job; when the chosen namespace or name is empty or missing, the event's own job.

Events that arrive over HTTP get the same key here, so a topic fed by both transports keeps that order.
"""

from __future__ import annotations

from typing import Any

from lineage.events.rules import DATASET_EVENT, JOB_EVENT, RUN_EVENT


def _names(node: Any) -> tuple[Any, Any]:
    if not isinstance(node, dict):
        return None, None
    return node.get("namespace"), node.get("name")


def _sub(node: Any, key: str) -> Any:
    return node.get(key) if isinstance(node, dict) else None


def kafka_key(document: dict[str, Any], kind: str | None) -> bytes | None:
    """The key of a valid event (``kind`` from its verdict); None for anything else."""
    if kind == DATASET_EVENT:
        namespace, name = _names(document.get("dataset"))
        prefix = "dataset"
    elif kind == JOB_EVENT:
        namespace, name = _names(document.get("job"))
        prefix = "job"
    elif kind == RUN_EVENT:
        prefix = "run"
        namespace, name = _names(document.get("job"))
        parent = _sub(_sub(document.get("run"), "facets"), "parent")
        if parent:
            root = _sub(parent, "root")
            chosen = _names(_sub(root, "job")) if root else _names(_sub(parent, "job"))
            if all(isinstance(part, str) and part for part in chosen):
                namespace, name = chosen
    else:
        return None
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    # A lone surrogate (legal in a JSON escape) cannot be encoded: '?' as Spark would store it.
    return f"{prefix}:{namespace}/{name}".encode("utf-8", "replace")
