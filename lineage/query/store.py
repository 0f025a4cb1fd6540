"""One entry point to the query core: the lineage model of one catalog, with names, walks and runs."""

from __future__ import annotations

from lineage.query.health import HealthQueries
from lineage.query.runs import RunQueries


class LineageStore(HealthQueries, RunQueries):
    """The lineage tables of one catalog, loaded lazily, one pyiceberg scan per table, and every question
    the front ends ask of them (names: :mod:`lineage.query.names`, walks: :mod:`lineage.query.walks`,
    health: :mod:`lineage.query.health`, runs: :mod:`lineage.query.runs`)."""
