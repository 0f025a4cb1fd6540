"""Maintain the lake's Iceberg tables: raw-event retention, compaction, manifests, snapshot expiry, orphans.

spark-submit jobs/maintain_lake.py [--now 2026-11-22T10:00:00Z]
(or plain ``python jobs/maintain_lake.py``). Everything else comes from conf/lineage.toml [maintain] and
LINEAGE__* env. Schedule it (e.g. daily) like the build: it never overlaps one (whichever of the two starts
second exits with status 75 and one line, and runs at its next slot). SIGTERM/SIGINT stop it before the
next table (the step under way is abandoned before its commit): lease released, one line, status 0.
"""

from __future__ import annotations

import argparse
import logging
import sys

from lineage.instrument import observed_maintenance
from lineage.io.lease import BUSY_EXIT, LakeBusy
from lineage.jobstart import catalog_failures, start_job
from lineage.settings import cli_instant
from lineage.stopping import JobStopped, stop_on_signals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--now", type=cli_instant, help="reference time for every age (default: now)")
    args = parser.parse_args(argv)
    settings, spark = start_job("maintain_lake", checkpoint=False)
    try:
        with catalog_failures("maintain_lake", settings), stop_on_signals(spark) as stop:
            result = observed_maintenance(spark, settings, now=args.now, stop=stop)
    except JobStopped as exc:
        print(f"maintain_lake: {exc}; the lease is released and the next run does the rest", file=sys.stderr)
        return 0
    except LakeBusy as exc:
        print(f"maintain_lake: {exc}", file=sys.stderr)
        return BUSY_EXIT
    out = logging.getLogger("maintain_lake")
    for t in result.tables:
        out.info(
            "%s: files %d -> %d, snapshots %d -> %d, retired %d rows, orphans %d",
            t.table,
            t.files_before,
            t.files_after,
            t.snapshots_before,
            t.snapshots_after,
            t.retired_rows,
            t.orphan_files,
        )
        if t.manifests_skipped:
            out.warning("%s: manifest rewrite left to the next run (%s)", t.table, t.manifests_skipped)
    out.info("done: %d tables in %.1f s", len(result.tables), result.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
