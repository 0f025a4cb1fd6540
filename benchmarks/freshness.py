"""Freshness: time from producing an event to seeing it in ``raw.events``, under the configured trigger.

The ingestion runs continuously (``benchmarks.stage stream``: ``run_ingest`` with the default trigger,
``10 seconds`` in conf/lineage.toml) on an empty topic. After a warm-up probe, each probe waits a random
part of one trigger interval (so the probes fall at random phases of the trigger), is produced (acks=all),
and is then looked for in every new snapshot of ``raw.events`` through pyiceberg. Its freshness is the
commit timestamp of the first snapshot that contains it (written by the committing JVM on this machine's
clock) minus the wall-clock time just before ``produce``. Polling (every 200 ms) only decides when we look;
the measurement itself comes from the snapshot timestamp.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from benchmarks import measure
from benchmarks import stage as stage_process
from benchmarks.tier import TierContext, ts
from benchmarks.workload import uuid7
from lineage.io.publish import producer_config
from lineage.settings import load_settings

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

POLL_S = 0.2
VISIBLE_TIMEOUT_S = 300.0
START_TIMEOUT_S = 600.0


def measure_freshness(
    *,
    run: TierContext,
    overrides: dict[str, Any],
    bootstrap: str,
    topic: str,
    probes: int,
    trigger: str,
    interval_s: float,
) -> dict[str, Any]:
    from confluent_kafka import Producer

    from lineage.io.catalog import open_catalog

    settings_file = run.work / "jobs" / "freshness.settings.json"
    settings_file.parent.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(json.dumps(overrides, indent=2))
    out = run.work / "jobs" / "freshness.json"
    log_file = run.logs / "freshness.log"
    settings = load_settings(**overrides)
    ident = f"{settings.catalog.raw_namespace}.events"
    rng = random.Random(f"freshness:{run.config.seed}")
    producer = Producer(producer_config(bootstrap, settings.kafka.max_message_bytes))
    samples: list[dict[str, Any]] = []
    with log_file.open("wb") as log_out:
        process = subprocess.Popen(
            stage_process.command(run.python, "stream", "--settings", str(settings_file), "--out", str(out)),
            env=stage_process.environment(),
            stdout=log_out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        sampler = measure.TreeSampler([process.pid])
        sampler.__enter__()
        try:
            catalog = _wait_started(process, log_file, settings.catalog, ident, open_catalog)
            seen: set[int] = set()

            def send_and_wait(warm_up: bool) -> dict[str, Any]:
                run_id, value = probe_event(datetime.now(UTC), rng)
                sent = time.time()
                producer.produce(topic, key=b"run:bench/freshness-probe", value=value)
                producer.flush(30)
                acked = time.time()
                committed, observed = _wait_visible(catalog, ident, run_id, seen, process)
                return {
                    "run_id": run_id,
                    "warm_up": warm_up,
                    "sent": sent,
                    "ack_s": round(acked - sent, 4),
                    "committed": committed,
                    "observed_s": round(observed - sent, 3),
                    "freshness_s": round(committed - sent, 3),
                }

            send_and_wait(warm_up=True)
            for _ in range(probes):
                time.sleep(rng.uniform(0, interval_s) if interval_s else rng.uniform(0, 1))
                samples.append(send_and_wait(warm_up=False))
        finally:
            measure.stop_tree(process, timeout_s=60)
            sampler.__exit__()
    values = [s["freshness_s"] for s in samples]
    ordered = sorted(values)
    return {
        "trigger": trigger,
        "interval_s": interval_s,
        "probes": samples,
        "freshness_s": measure.summarize(values),
        "p95_s": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else None,
        "peak_mib": round(sampler.peak / measure.MIB, 1),
        "stream_exit_code": process.returncode,
    }


def probe_event(at: datetime, rng: random.Random) -> tuple[str, bytes]:
    """A small valid RunEvent with a fresh run id (the freshness probe)."""
    run_id = uuid7(at, rng)
    event = {
        "eventType": "START",
        "eventTime": ts(at),
        "producer": "https://github.com/lineage-lakehouse/bench/freshness-probe",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id},
        "job": {"namespace": "bench", "name": "freshness-probe"},
    }
    return run_id, json.dumps(event).encode()


def _wait_started(
    process: subprocess.Popen[bytes], log_file: Any, catalog_settings: Any, ident: str, open_catalog: Any
) -> Catalog:
    """Wait until the streaming query runs (its start is logged) and the raw table exists."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the streaming ingestion exited with {process.returncode}:\n{measure.tail(log_file)}"
            )
        if "ingesting " in log_file.read_text(errors="replace"):
            catalog = open_catalog(catalog_settings)
            if catalog.table_exists(ident):
                return catalog
        time.sleep(1)
    raise TimeoutError(f"the streaming ingestion did not start within {START_TIMEOUT_S:.0f} s")


def _wait_visible(
    catalog: Catalog, ident: str, run_id: str, seen: set[int], process: subprocess.Popen[bytes]
) -> tuple[float, float]:
    """(commit time of the first snapshot holding ``run_id``, when we saw it)."""
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the streaming ingestion exited with {process.returncode}")
        table = catalog.load_table(ident)
        for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
            if snapshot.snapshot_id in seen:
                continue
            seen.add(snapshot.snapshot_id)
            found = table.scan(
                snapshot_id=snapshot.snapshot_id,
                row_filter=f"run_id == '{run_id}'",
                selected_fields=("run_id",),
            ).to_arrow()
            if found.num_rows:
                return snapshot.timestamp_ms / 1000.0, time.time()
        time.sleep(POLL_S)
    raise TimeoutError(f"probe {run_id} not visible in {ident} within {VISIBLE_TIMEOUT_S:.0f} s")
