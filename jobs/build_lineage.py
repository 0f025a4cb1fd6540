"""Build the lineage tables (lake.lineage.*) from lake.raw.events; incremental unless --full-refresh.

spark-submit jobs/build_lineage.py [--full-refresh | --re-extract | --every 60s] [--now 2026-11-22T10:00:00Z]
(or plain ``python jobs/build_lineage.py``). Everything else comes from conf/lineage.toml and LINEAGE__* env.

--every keeps one Spark session and builds whenever new raw snapshots exist (checked at that interval),
taking the writer lease per build. SIGTERM/SIGINT stop any build at its next step boundary: the lease is
released, one line says where, and the job exits with status 0 (the next build finishes the range).
"""

from __future__ import annotations

import argparse
import logging
import sys

from lineage.batch.build import BuildError
from lineage.instrument import observed_build
from lineage.io.lease import BUSY_EXIT, LakeBusy
from lineage.jobstart import catalog_failures, start_job
from lineage.settings import cli_instant, cli_interval
from lineage.stopping import JobStopped, stop_on_signals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--full-refresh",
        action="store_true",
        help="recompute every lineage table from the extracted form of all events (no JSON parsing)",
    )
    mode.add_argument(
        "--re-extract",
        action="store_true",
        help="parse every raw event again into the extracted form, then recompute every table",
    )
    mode.add_argument(
        "--every",
        type=cli_interval,
        metavar="INTERVAL",
        help="run continuously: build whenever new raw snapshots exist, checking every INTERVAL (60s, 5m)",
    )
    parser.add_argument(
        "--now",
        type=cli_instant,
        help="reference time for run liveness (default: now; with --every, of each build)",
    )
    args = parser.parse_args(argv)
    settings, spark = start_job("build_lineage", checkpoint=False)
    out = logging.getLogger("build_lineage")
    with catalog_failures("build_lineage", settings), stop_on_signals(spark) as stop:
        try:
            if args.every is not None:
                from lineage.batch.schedule import build_every

                done = build_every(spark, settings, args.every, stop, now=args.now)
                out.info(
                    "stopped by %s between builds: %d builds, %d new events",
                    stop.reason,
                    done.builds,
                    done.events,
                )
                return 0
            result = observed_build(
                spark,
                settings,
                full_refresh=args.full_refresh,
                re_extract=args.re_extract,
                now=args.now,
                stop=stop,
            )
        except JobStopped as exc:
            print(
                f"build_lineage: {exc}; the lease is released and the next build finishes it", file=sys.stderr
            )
            return 0
        except BuildError as exc:
            print(f"build_lineage: {exc}", file=sys.stderr)
            return 2
        except LakeBusy as exc:
            print(f"build_lineage: {exc}", file=sys.stderr)
            return BUSY_EXIT
    out.info(
        "done: %s build, %d new events, raw snapshot %s, %.1f s",
        result.mode,
        result.new_events,
        result.raw_snapshot_id,
        result.seconds,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
