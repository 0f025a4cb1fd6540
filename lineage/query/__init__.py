"""The query core: the lineage tables as read with pyiceberg, and the answers every front end gives.

The CLI (:mod:`lineage.cli`), the read API (:mod:`lineage.serve`) and the graph page are thin front ends
over it; nothing here knows click or HTTP.
"""
