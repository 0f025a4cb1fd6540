"""One entry point to the query core: the lineage model of one catalog, with names, walks and runs."""

from __future__ import annotations

from lineage.query.runs import RunQueries
from lineage.query.walks import Walks


class LineageStore(Walks, RunQueries):
    """The lineage tables of one catalog, loaded lazily, one pyiceberg scan per table, and every question
    the front ends ask of them (names: :mod:`lineage.query.names`, walks: :mod:`lineage.query.walks`,
    runs: :mod:`lineage.query.runs`)."""
