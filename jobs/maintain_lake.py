"""Maintain the lake's Iceberg tables: raw-event retention, compaction, manifests, snapshot expiry, orphans.

spark-submit jobs/maintain_lake.py [--now 2026-11-22T10:00:00Z]
(or plain ``python jobs/maintain_lake.py``). Everything else comes from conf/lineage.toml [maintain] and
LINEAGE__* env. Schedule it (e.g. daily) so that it does not overlap a build.
"""

from __future__ import annotations

import argparse
import logging
import sys

from lineage.instrument import observed_maintenance
from lineage.io.preflight import ConfigError, check_settings
from lineage.settings import cli_instant, load_settings
from lineage.spark import build_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--now", type=cli_instant, help="reference time for every age (default: now)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = load_settings()
    try:
        check_settings(settings, checkpoint=False)
    except ConfigError as exc:
        print(f"maintain_lake: {exc}", file=sys.stderr)
        return 2
    spark = build_session(settings, "maintain-lake")
    result = observed_maintenance(spark, settings, now=args.now)
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
    out.info("done: %d tables in %.1f s", len(result.tables), result.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
