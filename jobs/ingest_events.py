"""Land OpenLineage events from Kafka in Iceberg (``raw.events``, ``raw.rejected``), exactly once.

spark-submit jobs/ingest_events.py [--trigger availableNow|"10 seconds"] [--topic T] [--starting-offsets ...]
(or plain ``python jobs/ingest_events.py``). Everything else comes from conf/lineage.toml and LINEAGE__* env.
"""

from __future__ import annotations

import argparse
import logging
import sys

from lineage.instrument import observed_ingest
from lineage.jobstart import catalog_failures, start_job


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trigger", help="'availableNow' (land what is there, then stop) or an interval")
    parser.add_argument("--topic", help="Kafka topic (default: kafka.topic setting, 'input.runs')")
    parser.add_argument(
        "--starting-offsets", choices=["earliest", "latest"], help="where a new checkpoint starts reading"
    )
    args = parser.parse_args(argv)
    overrides = {"kafka": {"topic": args.topic}} if args.topic else {}
    settings, spark = start_job("ingest_events", checkpoint=True, **overrides)
    with catalog_failures("ingest_events", settings):
        progress = observed_ingest(
            spark, settings, trigger=args.trigger, starting_offsets=args.starting_offsets
        )
    logging.getLogger("ingest_events").info(
        "done: %d batches, %d messages read, %d landed, %d rejected, %d already landed",
        progress.batches,
        progress.rows_in,
        progress.landed,
        progress.rejected,
        progress.already_landed,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
