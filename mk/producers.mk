# Real dbt and Airflow producers (issue 17): dbt-core + dbt-duckdb + openlineage-dbt in .venv-dbt, Airflow +
# its OpenLineage and SQLite providers in .venv-airflow, and the end-to-end tests that run them
# (tests/integration/test_dbt_airflow_producers.py). docs/producers.md.
# Pins, in one place: conf/producers/requirements-{dbt,airflow}.txt (what we ask for) and
# conf/producers/constraints-{dbt,airflow}.txt (the whole resolved set, `pip freeze` of a clean install).

# One venv each, kept out of the main venv. Resolved apart they differ on protobuf (6.33.6 / 7.36.2), pathspec,
# python-dateutil, importlib_metadata and more-itertools; one shared venv for both was not tried.
PRODUCER_VENVS := .venv-dbt .venv-airflow

TEST_PREREQS += producers-setup

.PHONY: producers-setup producers-e2e producers-clean

$(addsuffix /.installed,$(PRODUCER_VENVS)): .venv-%/.installed: conf/producers/requirements-%.txt conf/producers/constraints-%.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (set PYTHON=...)")'
	rm -rf .venv-$*
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q -r conf/producers/requirements-$*.txt -c conf/producers/constraints-$*.txt
	@touch $@

producers-setup: $(addsuffix /.installed,$(PRODUCER_VENVS)) ## Install dbt (+duckdb, openlineage-dbt) and Airflow (+OpenLineage provider) into .venv-dbt/.venv-airflow
	@echo "Producers ready: dbt $$(.venv-dbt/bin/python -c 'from importlib.metadata import version; print(version("dbt-core"))'), airflow $$(.venv-airflow/bin/python -c 'from importlib.metadata import version; print(version("apache-airflow"))')"

producers-e2e: setup producers-setup ## Real dbt and Airflow runs with OpenLineage -> Kafka -> ingestion -> build (pytest -m producers)
	@$(PY) -m pytest -m producers; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no producers tests: failing loudly" >&2; exit 1; fi; exit $$rc

producers-clean: ## Delete the dbt and Airflow venvs
	rm -rf $(PRODUCER_VENVS)

distclean: producers-clean
