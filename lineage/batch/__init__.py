"""Batch builds over the raw tables (orchestration: reads and writes go through lineage.io)."""
