"""Real Flink producers (PyFlink jobs with the OpenLineage integration), run by the Flink venvs."""
