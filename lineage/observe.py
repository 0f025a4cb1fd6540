"""Self-instrumentation: every job of ours reports its own runs as OpenLineage events.

The transport is whatever openlineage-python resolves (``OPENLINEAGE_CONFIG``, ``./openlineage.yml``,
``~/.openlineage/openlineage.yml``, ``OPENLINEAGE__...`` variables, ``OPENLINEAGE_URL``); when none of those
is set, the ``[openlineage] config`` file of our settings (``conf/openlineage.yml``: the Kafka topic we
ingest) is used, so our own jobs land in ``lake.lineage.*`` after the next build.

Emitting never fails a job: events go through one worker thread; the first error (or a transport that
does not answer within ``emit_timeout_seconds``) is logged once as a warning and the job carries on.
``send_now`` is the strict variant for ``lineage close-run``, where emitting *is* the job.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attr
import yaml
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    OutputDatasetFacet,
    RunFacet,
    column_lineage_dataset,
    documentation_job,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    symlinks_dataset,
)
from openlineage.client.uuid import generate_new_uuid

from lineage.events.redact import redact_text, without_credentials
from lineage.settings import CatalogSettings, OpenLineageSettings
from lineage.stopping import JobStopped

log = logging.getLogger(__name__)

VERSION = metadata.version("lineage-lakehouse")
PRODUCER = f"urn:lineage-lakehouse:{VERSION}"
OPENLINEAGE_VERSION = metadata.version("openlineage-python")
# Environment an orchestrator sets to make our run its child: "<namespace>/<job name>/<run id>".
PARENT_ENV = "OPENLINEAGE_PARENT_ID"
ROOT_PARENT_ENV = "OPENLINEAGE_ROOT_PARENT_ID"
_CLIENT_CONFIG_SOURCES = ("OPENLINEAGE_CONFIG", "OPENLINEAGE_URL", "OPENLINEAGE_DISABLED")


class EmitError(RuntimeError):
    """An event could not be handed to the transport (strict sending only)."""


# -- transport -------------------------------------------------------------------------------------------
def use_default_config(settings: OpenLineageSettings) -> bool:
    """Point the client at our ``openlineage.yml`` unless the user configured the client some other way;
    True when ours is used."""
    if any(os.environ.get(name) for name in _CLIENT_CONFIG_SOURCES):
        return os.environ.get("OPENLINEAGE_CONFIG") == str(settings.config)
    if any(key.startswith(OpenLineageClient.DYNAMIC_ENV_VARS_PREFIX) for key in os.environ):
        return False
    if Path("openlineage.yml").is_file() or Path("~/.openlineage/openlineage.yml").expanduser().is_file():
        return False
    if settings.config is not None and settings.config.is_file():
        os.environ["OPENLINEAGE_CONFIG"] = str(settings.config)
        return True
    return False


def default_transport_overrides(settings: OpenLineageSettings) -> dict[str, Any]:
    """What our default file's Kafka transport takes from [kafka]: the address and topic we ingest from
    (the file's own 127.0.0.1:9092 is only the local broker's default)."""
    if settings.kafka_target is None or settings.config is None:
        return {}
    with settings.config.open() as f:
        transport = (yaml.safe_load(f) or {}).get("transport") or {}
    if transport.get("type") != "kafka":
        return {}
    bootstrap_servers, topic = settings.kafka_target
    security = settings.kafka_security.librdkafka() if settings.kafka_security else {}
    return {"transport": {"topic": topic, "config": {"bootstrap.servers": bootstrap_servers, **security}}}


def new_client(settings: OpenLineageSettings) -> OpenLineageClient:
    if use_default_config(settings):
        # openlineage-python merges a constructor config over the file's (file < constructor).
        overrides = default_transport_overrides(settings)
        if overrides:
            return OpenLineageClient(config=overrides)
    return OpenLineageClient()


class Emitter:
    """Hands events to the openlineage-python client on a worker thread; never raises, warns once."""

    def __init__(self, settings: OpenLineageSettings, label: str) -> None:
        self.settings = settings
        self.label = label
        self.sent = 0
        self.failed = not settings.enabled
        self._queue: queue.Queue[RunEvent | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._client: OpenLineageClient | None = None
        self._warned = False

    def emit(self, event: RunEvent) -> None:
        if self.failed:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="openlineage-emitter", daemon=True)
            self._thread.start()
        self._queue.put(event)

    def _work(self) -> None:
        while (event := self._queue.get()) is not None:
            if self.failed:
                continue
            try:
                if self._client is None:
                    self._client = new_client(self.settings)
                self._client.emit(event)
                self.sent += 1
            except Exception as exc:  # any transport error: report once, keep the job going
                self._warn(f"{type(exc).__name__}: {exc}")
        if self._client is not None and not self.failed:
            try:
                self._client.close(self.settings.emit_timeout_seconds)
            except Exception as exc:
                self._warn(f"{type(exc).__name__}: {exc}")

    def _warn(self, reason: str) -> None:
        self.failed = True
        if not self._warned:
            self._warned = True
            log.warning(
                "OpenLineage events about %s could not be emitted (%s); the job carries on without them",
                self.label,
                reason,
            )

    def close(self) -> bool:
        """Wait (bounded by ``emit_timeout_seconds``) for queued events; True when all were sent."""
        if self._thread is None:
            return not self.failed
        self._queue.put(None)
        self._thread.join(self.settings.emit_timeout_seconds)
        if self._thread.is_alive():
            self._warn(f"transport did not finish within {self.settings.emit_timeout_seconds:g} s")
        self._thread = None
        return not self.failed


def send_now(event: RunEvent, settings: OpenLineageSettings) -> None:
    """Emit one event and wait for the transport to finish.

    Raises:
        EmitError: the transport failed or did not finish within ``emit_timeout_seconds``.
    """
    errors: list[BaseException] = []

    def _send() -> None:
        try:
            client = new_client(settings)
            client.emit(event)
            if not client.close(settings.emit_timeout_seconds):
                errors.append(EmitError("the transport still held the event when closed"))
        except Exception as exc:
            errors.append(exc)

    worker = threading.Thread(target=_send, name="openlineage-send", daemon=True)
    worker.start()
    worker.join(settings.emit_timeout_seconds)
    if worker.is_alive():
        raise EmitError(f"the transport did not answer within {settings.emit_timeout_seconds:g} s")
    if errors:
        raise EmitError(f"{type(errors[0]).__name__}: {errors[0]}")


# -- naming ----------------------------------------------------------------------------------------------
def location_name(location: str) -> tuple[str, str]:
    """OpenLineage namespace and name of a table location (``file`` + path, ``s3://bucket`` + key ...)."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file"):
        return "file", parts.path or location
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")


def catalog_namespace(catalog: CatalogSettings) -> str:
    """The namespace of the catalog-table symlink: the catalog's address (hive:// for a Hive metastore)."""
    # Never the credentials a catalog URI may hold (user:password@, ?password=): events are published.
    uri = without_credentials(catalog.spark_properties().get("uri", ""))
    if uri.startswith("thrift://"):
        return "hive://" + uri.removeprefix("thrift://").split(",")[0]
    return uri or f"iceberg://{catalog.name}"


@dataclass
class TableInfo:
    """What the events say about one Iceberg table of ours."""

    namespace: str
    name: str
    symlink_namespace: str
    symlink_name: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    rows: int | None = None
    files: int | None = None
    size: int | None = None


def describe_tables(catalog: CatalogSettings, names: Sequence[tuple[str, str]]) -> list[TableInfo]:
    """Location, schema and current size of existing tables (pyiceberg); missing tables are skipped."""
    from lineage.io.catalog import open_catalog  # pyiceberg import only when needed

    found = []
    iceberg = open_catalog(catalog)
    for namespace, table in names:
        try:
            loaded = iceberg.load_table((namespace, table))
        except Exception as exc:  # NoSuchTableError and catalog errors alike: describe what we can
            log.debug("not describing %s.%s: %s", namespace, table, exc)
            continue
        ns, name = location_name(loaded.metadata.location)
        info = TableInfo(ns, name, catalog_namespace(catalog), f"{namespace}.{table}")
        info.fields = [(f.name, str(f.field_type)) for f in loaded.schema().fields]
        snapshot = loaded.current_snapshot()
        if snapshot is not None and snapshot.summary is not None:
            summary = snapshot.summary.additional_properties
            info.rows = _int(summary.get("total-records"))
            info.files = _int(summary.get("total-data-files"))
            info.size = _int(summary.get("total-files-size"))
        found.append(info)
    return found


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


# Column lineage of an output: target field -> ([(source key, source field)], type, subtype); the source
# keys name datasets given as ``sources`` {key: (namespace, name)}.
ColumnMap = Mapping[str, tuple[Sequence[tuple[str, str]], str, str]]
Sources = Mapping[str, tuple[str, str]]


def dataset_facets(
    info: TableInfo, *, column_map: ColumnMap | None = None, sources: Sources | None = None
) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "symlinks": symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(info.symlink_namespace, info.symlink_name, "TABLE")]
        ),
    }
    if info.fields:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in info.fields]
        )
    if column_map and sources:
        known = {name for name, _ in info.fields}
        columns = {}
        for target, (inputs, kind, subtype) in column_map.items():
            fields = [
                column_lineage_dataset.InputField(
                    namespace=sources[key][0],
                    name=sources[key][1],
                    field=source_field,
                    transformations=[column_lineage_dataset.Transformation(type=kind, subtype=subtype)],
                )
                for key, source_field in inputs
                if key in sources
            ]
            if fields and (not known or target in known):
                columns[target] = column_lineage_dataset.Fields(inputFields=fields)
        if columns:
            facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(fields=columns)
    return facets


def input_dataset(info: TableInfo) -> InputDataset:
    return InputDataset(namespace=info.namespace, name=info.name, facets=dataset_facets(info))


def output_dataset(
    info: TableInfo,
    *,
    rows: int | None = None,
    column_map: ColumnMap | None = None,
    sources: Sources | None = None,
) -> OutputDataset:
    """An output; ``rows`` = rows this run wrote (default: the table's size after a full rewrite)."""
    stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet
    output_facets: dict[str, OutputDatasetFacet]
    if rows is not None:
        output_facets = {"outputStatistics": stats(rowCount=rows)}
    elif info.rows is not None:
        output_facets = {"outputStatistics": stats(rowCount=info.rows, size=info.size, fileCount=info.files)}
    else:
        output_facets = {}
    return OutputDataset(
        namespace=info.namespace,
        name=info.name,
        facets=dataset_facets(info, column_map=column_map, sources=sources),
        outputFacets=output_facets,
    )


def kafka_name(bootstrap_servers: str, topic: str) -> tuple[str, str]:
    """A Kafka topic as OpenLineage names it: the first bootstrap server, then the topic."""
    return f"kafka://{bootstrap_servers.split(',')[0].strip()}", topic


def kafka_topic(bootstrap_servers: str, topic: str) -> InputDataset:
    """A Kafka topic input with the fields Spark's Kafka source reads."""
    namespace, name = kafka_name(bootstrap_servers, topic)
    fields = [("key", "binary"), ("value", "binary"), ("partition", "int"), ("offset", "long")]
    fields.append(("timestamp", "timestamp"))
    return InputDataset(
        namespace=namespace,
        name=name,
        facets={
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields]
            )
        },
    )


# -- runs ------------------------------------------------------------------------------------------------
@attr.define
class ProgressRunFacet(RunFacet):
    """Running totals of a streaming run of ours (sent with RUNNING and terminal events)."""

    batches: int
    messagesRead: int
    landed: int
    rejected: int
    alreadyLanded: int

    @staticmethod
    def _get_schema() -> str:
        return "urn:lineage-lakehouse:facets:ProgressRunFacet"


@dataclass(frozen=True)
class RunRef:
    namespace: str
    name: str
    run_id: str

    @classmethod
    def parse(cls, text: str) -> RunRef:
        """``<namespace>/<job name>/<run id>`` (the job name may contain slashes)."""
        value = text.strip()
        # A namespace may be a URI (http://jobmanager:8081): it then ends at the first / after the authority.
        start = value.index("://") + 3 if "://" in value else 0
        cut = value.find("/", start)
        namespace, rest = (value[:cut], value[cut + 1 :]) if cut >= 0 else (value, "")
        name, _, run_id = rest.rpartition("/")
        if not namespace or not name or not run_id:
            raise ValueError(f"expected <namespace>/<job name>/<run id>, got {text!r}")
        return cls(namespace, name, run_id)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.run_id}"


def parent_from_env() -> tuple[RunRef | None, RunRef | None]:
    """The orchestrating run (and its root) passed by ``OPENLINEAGE_PARENT_ID`` / ``..._ROOT_PARENT_ID``."""
    refs: list[RunRef | None] = []
    for name in (PARENT_ENV, ROOT_PARENT_ENV):
        value = os.environ.get(name)
        try:
            refs.append(RunRef.parse(value) if value else None)
        except ValueError as exc:
            log.warning("ignoring %s: %s", name, exc)
            refs.append(None)
    return refs[0], refs[1]


def parent_facet(parent: RunRef, root: RunRef | None = None) -> parent_run.ParentRunFacet:
    root = root or parent
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id),
        job=parent_run.Job(namespace=parent.namespace, name=parent.name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root.run_id),
            job=parent_run.RootJob(namespace=root.namespace, name=root.name),
        ),
    )


@dataclass
class TrackedRun:
    """One run of one of our jobs; its events share a run id, job facets and run facets."""

    emitter: Emitter
    namespace: str
    job_name: str
    processing_type: str  # BATCH or STREAMING
    description: str = ""
    engine: tuple[str, str] | None = None  # (name, version), e.g. ("spark", "4.1.3")
    parent: RunRef | None = None
    root: RunRef | None = None
    run_id: str = field(default_factory=lambda: str(generate_new_uuid()))
    progress: ProgressRunFacet | None = None

    @property
    def ref(self) -> RunRef:
        return RunRef(self.namespace, self.job_name, self.run_id)

    def _job(self) -> Job:
        facets: dict[str, Any] = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType=self.processing_type, integration="LINEAGE_LAKEHOUSE", jobType="JOB"
            )
        }
        if self.description:
            facets["documentation"] = documentation_job.DocumentationJobFacet(description=self.description)
        return Job(namespace=self.namespace, name=self.job_name, facets=facets)

    def _run(self, extra: Mapping[str, RunFacet]) -> Run:
        facets: dict[str, RunFacet] = {}
        if self.engine is not None:
            facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
                version=self.engine[1], name=self.engine[0], openlineageAdapterVersion=OPENLINEAGE_VERSION
            )
        if self.parent is not None:
            facets["parent"] = parent_facet(self.parent, self.root)
        if self.progress is not None:
            facets["lineageLakehouse_progress"] = self.progress
        facets.update(extra)
        return Run(runId=self.run_id, facets=facets)

    def event(
        self,
        state: RunState,
        inputs: Sequence[InputDataset] = (),
        outputs: Sequence[OutputDataset] = (),
        run_facets: Mapping[str, RunFacet] | None = None,
    ) -> RunEvent:
        return RunEvent(
            eventType=state,
            eventTime=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            run=self._run(run_facets or {}),
            job=self._job(),
            producer=PRODUCER,
            inputs=list(inputs),
            outputs=list(outputs),
        )

    def emit(
        self, state: RunState, inputs: Sequence[InputDataset] = (), outputs: Sequence[OutputDataset] = ()
    ) -> None:
        self.emitter.emit(self.event(state, inputs, outputs))

    def fail(self, exc: BaseException, inputs: Sequence[InputDataset] = ()) -> None:
        # An error text can quote a connection string: the same rules as the ingestion's, before sending.
        error = error_message_run.ErrorMessageRunFacet(
            message=redact_text(f"{type(exc).__name__}: {exc}")[0],
            programmingLanguage="PYTHON",
            stackTrace=redact_text("".join(traceback.format_exception(exc)))[0],
        )
        self.emitter.emit(self.event(RunState.FAIL, inputs, (), {"errorMessage": error}))


@contextmanager
def tracked_run(
    settings: OpenLineageSettings,
    job_name: str,
    *,
    processing_type: str,
    description: str = "",
    engine: tuple[str, str] | None = None,
) -> Iterator[TrackedRun]:
    """A run of ours: the caller emits START/RUNNING/COMPLETE; an exception escaping emits FAIL (ABORT for a
    requested stop, :class:`lineage.stopping.JobStopped`).

    The emitter is drained (bounded wait) when the block ends, whatever happened.
    """
    parent, root = parent_from_env()
    emitter = Emitter(settings, f"{settings.namespace}/{job_name}")
    run = TrackedRun(
        emitter, settings.namespace, job_name, processing_type, description, engine, parent, root
    )
    try:
        yield run
    except JobStopped:
        run.emit(RunState.ABORT)
        raise
    except BaseException as exc:
        if not isinstance(exc, SystemExit) or exc.code not in (0, None):
            run.fail(exc)
        raise
    finally:
        emitter.close()


@contextmanager
def every(seconds: float, action: Callable[[], None]) -> Iterator[None]:
    """Call ``action`` every ``seconds`` on a daemon thread while the block runs (heartbeats)."""
    stop = threading.Event()

    def _loop() -> None:
        while not stop.wait(seconds):
            try:
                action()
            except Exception as exc:  # a heartbeat must never take the job down
                log.warning("periodic OpenLineage event failed: %s", exc)

    thread = threading.Thread(target=_loop, name="openlineage-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
