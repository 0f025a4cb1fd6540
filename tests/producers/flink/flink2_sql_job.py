"""A real Flink 2.x SQL job with the OpenLineage listener (FLIP-314): Kafka ``orders`` -> per-supplier
totals per 5-second window -> Kafka ``supplier-stats``, the seed lab's shape written as PyFlink SQL.

Runs in .venv-flink2 (apache-flink, conf/flink/requirements-flink2.txt) on a local cluster inside PyFlink's
gateway JVM; the jars of .jars/flink2/ (openlineage-flink, the Kafka SQL connector, kafka-clients) are in
its lib/. The listener reads OPENLINEAGE_CONFIG (an openlineage.yml with the Kafka transport), so set it
before starting:

    export OPENLINEAGE_CONFIG=/tmp/openlineage.yml
    .venv-flink2/bin/python -m tests.producers.flink.flink2_sql_job \\
        --bootstrap 127.0.0.1:9092 --source-topic orders --sink-topic supplier-stats \\
        --job-name supplier-stats-sql --rest-port 18081 --mode complete < /dev/null

``--mode complete`` reads the topic up to its end offsets and finishes; ``--mode cancel`` reads without end
and cancels the job (through its JobClient) when ``cancel`` arrives on stdin. Either way the process then
waits for stdin to close (tests.producers.flink.runtime).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.producers.flink.runtime import (
    REPO,
    flink_options,
    linger,
    say,
    temporary_lib_dir,
    use_flink_lib,
    wait_for_command,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source-topic", required=True)
    parser.add_argument("--sink-topic", required=True)
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--rest-port", type=int, required=True)
    parser.add_argument("--mode", choices=("complete", "cancel"), required=True)
    parser.add_argument("--conf", type=Path, default=REPO / "conf/flink/flink2-config.yaml")
    parser.add_argument("--jars", type=Path, default=REPO / ".jars/flink2")
    parser.add_argument("--lib-dir", type=Path, default=None)
    args = parser.parse_args()

    use_flink_lib(args.lib_dir or temporary_lib_dir("flink2-lib-"), args.jars)
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = Configuration()
    for key, value in flink_options(args.conf, rest_port=args.rest_port).items():
        config.set_string(key, value)
    config.set_string("pipeline.name", args.job_name)
    settings = EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(config).build()
    tables = TableEnvironment.create(settings)

    kafka = f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{args.bootstrap}', 'format' = 'json'"
    bounded = ", 'scan.bounded.mode' = 'latest-offset'" if args.mode == "complete" else ""
    tables.execute_sql(
        "CREATE TABLE orders (order_id STRING, item STRING, price DOUBLE, supplier STRING, "
        "bid_time TIMESTAMP(3), WATERMARK FOR bid_time AS bid_time - INTERVAL '1' SECOND) "
        f"WITH ({kafka}, 'topic' = '{args.source_topic}', 'properties.group.id' = '{args.job_name}', "
        f"'scan.startup.mode' = 'earliest-offset'{bounded})"
    )
    tables.execute_sql(
        "CREATE TABLE supplier_stats (window_start TIMESTAMP(3), window_end TIMESTAMP(3), supplier STRING, "
        f"total_price DOUBLE, order_count BIGINT) WITH ({kafka}, 'topic' = '{args.sink_topic}')"
    )
    result = tables.execute_sql(
        "INSERT INTO supplier_stats SELECT window_start, window_end, supplier, SUM(price), COUNT(*) "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(bid_time), INTERVAL '5' SECOND)) "
        "GROUP BY window_start, window_end, supplier"
    )
    client = result.get_job_client()
    say(f"SUBMITTED {client.get_job_id()}")
    if args.mode == "complete":
        result.wait()
        say("FINISHED")
    else:
        command = wait_for_command()
        if command != "cancel":
            raise SystemExit(f"expected 'cancel' on stdin, got {command!r}")
        client.cancel().result()
        say("CANCELLED")
    linger()


if __name__ == "__main__":
    main()
