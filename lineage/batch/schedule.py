"""The continuous build: one Spark session that builds whenever new raw snapshots exist.

``jobs/build_lineage.py --every 60s`` keeps the session (and the JVM's compiled code) between builds, asks
every interval whether the raw table moved (:func:`lineage.batch.build.has_new_events`: two metadata
queries, no lease, no event of our own), and only then runs a build like a scheduled one: it takes the
writer lease for that build alone, so a maintenance can run between two builds (a build that finds the
maintenance holding the lease waits for the next interval). SIGTERM/SIGINT end the loop: between builds at
once, during one at its next step boundary (:mod:`lineage.stopping`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import SparkSession

from lineage.batch.build import has_new_events
from lineage.instrument import observed_build
from lineage.io.lease import LakeBusy
from lineage.settings import Settings
from lineage.stopping import StopRequest

log = logging.getLogger(__name__)


@dataclass
class ContinuousResult:
    builds: int = 0  # builds that committed something
    busy: int = 0  # intervals whose build found the lease held (a maintenance)
    events: int = 0  # new events extracted over all builds


def build_every(
    spark: SparkSession,
    settings: Settings,
    seconds: float,
    stop: StopRequest,
    *,
    now: datetime | None = None,
) -> ContinuousResult:
    """Build whenever new raw snapshots exist, checking every ``seconds``, until ``stop`` is requested
    (``now``: a fixed reference time for every build's liveness, for reproducible runs; default: the time
    of each build).

    A stop that comes while the loop waits or checks for new snapshots ends it here (no build was running);
    one that comes during a build ends that build at its next step boundary.

    Raises:
        JobStopped: the stop came during a build (the build's own line says after which step).
        BuildError: the lake cannot be built at all (e.g. the last build's raw snapshot was expired).
    """
    result = ContinuousResult()
    while not stop.requested:
        tick = time.monotonic()
        try:
            fresh = has_new_events(spark, settings)
        except Exception:
            if stop.requested:  # the stop cancelled the check itself: no build was running
                break
            raise
        if fresh and not stop.requested:
            try:
                built = observed_build(spark, settings, now=now, stop=stop)
            except LakeBusy as exc:
                result.busy += 1
                log.warning("%s; trying again in %.0f s", exc, seconds)
            else:
                if built.mode != "noop":
                    result.builds += 1
                    result.events += built.new_events
                    log.info(
                        "build %d: %s, %d new events, raw snapshot %s, %.1f s",
                        result.builds,
                        built.mode,
                        built.new_events,
                        built.raw_snapshot_id,
                        built.seconds,
                    )
            # What a build cached or checkpointed is not needed by the next one.
            spark.catalog.clearCache()
        stop.wait(max(0.0, seconds - (time.monotonic() - tick)))
    return result
