"""pyiceberg access to the same catalog Spark uses (no JVM)."""

from __future__ import annotations

from pyiceberg.catalog import Catalog, load_catalog

from lineage.settings import CatalogSettings


def open_catalog(settings: CatalogSettings) -> Catalog:
    """The Iceberg catalog named ``settings.name`` (embedded SQLite default or configured properties)."""
    return load_catalog(settings.name, **settings.pyiceberg_properties())
