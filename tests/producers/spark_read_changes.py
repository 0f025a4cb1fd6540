"""A real PySpark job with the OpenLineage Spark listener that consumes a Debezium change topic: the
downstream reader of the Kafka Connect producer test (tests/integration/test_connect_producer.py).

It reads the topic in one batch (Kafka source, earliest to latest), keeps each change's ``after`` row and
writes the latest state per order into an Iceberg table of a Hadoop catalog (openlineage-spark names such
tables; see tests/producers/spark_orders_report.py). The listener sends through its Kafka transport.

    python tests/producers/spark_read_changes.py --bootstrap 127.0.0.1:9092 --topic input.runs \\
        --changes shop.public.orders --warehouse /tmp/cdc
"""

from __future__ import annotations

import argparse

from spark_listener import kafka_transport, listener_session, stop_after_last_events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True, help="the broker of the change topic and of the events")
    parser.add_argument("--topic", required=True, help="Kafka transport: the OpenLineage topic")
    parser.add_argument("--changes", required=True, help="the Debezium change topic to read")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--namespace", default="spark-cdc")
    args = parser.parse_args()
    spark = listener_session(
        "orders_from_cdc", "cdc", args.warehouse, args.namespace, kafka_transport(args.bootstrap, args.topic)
    )
    changes = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.changes)
        .option("startingOffsets", "earliest")
        .load()
    )
    changes.createOrReplaceTempView("changes")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS cdc.db")
    # The worker's JSON converter writes the envelope without its schema: {"before": ..., "after": ...}.
    spark.sql(
        "CREATE TABLE cdc.db.orders_latest USING iceberg AS "
        "SELECT after.id AS order_id, max_by(after.status, offset) AS status FROM ("
        "  SELECT offset, from_json(CAST(value AS STRING), 'after STRUCT<id: INT, status: STRING>').after"
        "  AS after FROM changes"
        ") WHERE after IS NOT NULL GROUP BY after.id"
    )
    stop_after_last_events(spark)


if __name__ == "__main__":
    main()
