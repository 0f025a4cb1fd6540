"""A real PySpark job instrumented with the OpenLineage Spark listener: the producer of the end-to-end test.

It reads two Iceberg tables and writes a third through a join, a filter and an aggregation (with
``--second-round``, then appends to the orders and rebuilds the third from them: a second version of
each, read and written by runs of their own); the listener
(``io.openlineage:openlineage-spark_2.13``, from ``make jars``) sends its events through its Kafka transport,
or, with ``--http-url``, through its HTTP transport (gzip) to ``lineage serve``.

    python tests/producers/spark_orders_report.py --bootstrap 127.0.0.1:9092 --topic input.runs \\
        --warehouse /tmp/shop
    python tests/producers/spark_orders_report.py --http-url http://127.0.0.1:5000 --api-key KEY \\
        --warehouse /tmp/shop

The job's own tables live in an Iceberg Hadoop catalog (``shop``): openlineage-spark 1.53 names Iceberg
datasets from the catalog type and cannot name tables of a JDBC catalog (it fails building a ``hive:`` URI).
"""

from __future__ import annotations

import argparse

from spark_listener import kafka_transport, listener_session, stop_after_last_events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", help="Kafka transport: bootstrap servers")
    parser.add_argument("--topic", help="Kafka transport: topic")
    parser.add_argument("--http-url", help="HTTP transport instead: the intake's base URL")
    parser.add_argument("--api-key", help="HTTP transport: the intake's API key")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--namespace", default="spark-shop")
    parser.add_argument(
        "--second-round",
        action="store_true",
        help="Then append to orders and rebuild the report from it: a second version of both tables",
    )
    args = parser.parse_args()
    openlineage = {"spark.openlineage.columnLineage.datasetLineageEnabled": "true"}
    if args.http_url:
        openlineage |= {
            "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": args.http_url,
            "spark.openlineage.transport.endpoint": "/api/v1/lineage",
            "spark.openlineage.transport.compression": "gzip",
        }
        if args.api_key:
            openlineage |= {
                "spark.openlineage.transport.auth.type": "api_key",
                "spark.openlineage.transport.auth.apiKey": args.api_key,
            }
    else:
        if not (args.bootstrap and args.topic):
            parser.error("--bootstrap and --topic (Kafka transport), or --http-url")
        openlineage |= kafka_transport(args.bootstrap, args.topic)
        openlineage["spark.openlineage.transport.properties.max.request.size"] = str(32 * 1024 * 1024)
    spark = listener_session("orders_report", "shop", args.warehouse, args.namespace, openlineage)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS shop.db")
    spark.sql(
        "CREATE TABLE shop.db.orders (order_id string, customer_id string, price double, status string) "
        "USING iceberg"
    )
    spark.sql("CREATE TABLE shop.db.customers (customer_id string, country string) USING iceberg")
    spark.sql(
        "INSERT INTO shop.db.orders VALUES ('o1', 'c1', 10.0, 'PAID'), ('o2', 'c2', 5.0, 'PAID'), "
        "('o3', 'c1', 7.0, 'CANCELLED')"
    )
    spark.sql("INSERT INTO shop.db.customers VALUES ('c1', 'DE'), ('c2', 'FR')")
    spark.sql(
        "CREATE TABLE shop.db.revenue_by_country USING iceberg AS "
        "SELECT c.country, sum(o.price) AS revenue, count(o.order_id) AS orders "
        "FROM shop.db.orders o JOIN shop.db.customers c ON o.customer_id = c.customer_id "
        "WHERE o.status = 'PAID' GROUP BY c.country"
    )
    if args.second_round:
        spark.sql("INSERT INTO shop.db.orders VALUES ('o4', 'c2', 3.0, 'PAID')")
        spark.sql(
            "INSERT OVERWRITE shop.db.revenue_by_country "
            "SELECT c.country, sum(o.price) AS revenue, count(o.order_id) AS orders "
            "FROM shop.db.orders o JOIN shop.db.customers c ON o.customer_id = c.customer_id "
            "WHERE o.status = 'PAID' GROUP BY c.country"
        )
    stop_after_last_events(spark)


if __name__ == "__main__":
    main()
