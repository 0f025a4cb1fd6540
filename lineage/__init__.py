"""Lineage lakehouse: OpenLineage events from Kafka into Apache Iceberg, turned into lineage tables."""

from __future__ import annotations

__version__ = "0.1.0"
