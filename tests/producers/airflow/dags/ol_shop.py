"""A DAG of three dependent SQL tasks on a local SQLite file, for the real Airflow producer test.

load_raw >> build_staging >> build_mart, each a SQLExecuteQueryOperator on the connection ``shop_sqlite``
(AIRFLOW_CONN_SHOP_SQLITE, set by the test). The sqlite provider's hook does not tell the OpenLineage provider
which database it is on, so its tasks would report no datasets: ``ShopSqliteHook`` names it (scheme
``sqlite``, authority ``localhost``, database ``shop``, schema ``main``) and ``ShopSqlOperator`` uses it.
"""

from __future__ import annotations

from datetime import datetime

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.openlineage.sqlparser import DatabaseInfo
from airflow.providers.sqlite.hooks.sqlite import SqliteHook
from airflow.sdk import DAG


class ShopSqliteHook(SqliteHook):
    def get_openlineage_database_info(self, connection):  # type: ignore[no-untyped-def]
        return DatabaseInfo(scheme="sqlite", authority="localhost", database="shop")

    def get_openlineage_database_dialect(self, connection):  # type: ignore[no-untyped-def]
        return "sqlite"

    def get_openlineage_default_schema(self):  # type: ignore[no-untyped-def]
        return "main"


class ShopSqlOperator(SQLExecuteQueryOperator):
    def get_db_hook(self) -> ShopSqliteHook:
        return ShopSqliteHook(sqlite_conn_id=self.conn_id)


with DAG(dag_id="ol_shop", start_date=datetime(2026, 11, 1), schedule=None, catchup=False, tags=["lineage"]):
    load_raw = ShopSqlOperator(
        task_id="load_raw",
        conn_id="shop_sqlite",
        sql=[
            "DROP TABLE IF EXISTS raw_orders",
            "CREATE TABLE raw_orders (order_id INTEGER, customer_id INTEGER, amount REAL, status TEXT)",
            "INSERT INTO raw_orders VALUES (1, 10, 12.5, 'shipped'), (2, 10, 7.25, 'shipped'), "
            "(3, 11, 30.0, 'returned'), (4, 12, 4.75, 'shipped'), (5, 11, 18.0, 'shipped')",
        ],
    )
    build_staging = ShopSqlOperator(
        task_id="build_staging",
        conn_id="shop_sqlite",
        sql=[
            "DROP TABLE IF EXISTS stg_orders",
            "CREATE TABLE stg_orders (order_id INTEGER, customer_id INTEGER, amount REAL)",
            "INSERT INTO stg_orders SELECT order_id, customer_id, amount FROM raw_orders "
            "WHERE status <> 'returned'",
        ],
    )
    build_mart = ShopSqlOperator(
        task_id="build_mart",
        conn_id="shop_sqlite",
        sql=[
            "DROP TABLE IF EXISTS customer_revenue",
            "CREATE TABLE customer_revenue (client_id INTEGER, total_amount REAL, order_count INTEGER)",
            "INSERT INTO customer_revenue SELECT customer_id AS client_id, SUM(amount) AS total_amount, "
            "COUNT(*) AS order_count FROM stg_orders GROUP BY customer_id",
        ],
    )
    load_raw >> build_staging >> build_mart
