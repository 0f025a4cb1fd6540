# The HTTP intake (issue 15): `lineage serve`, configured under [serve] in conf/lineage.toml (docs/intake.md).
# Its benchmark, `make bench-intake` (python -m benchmarks.intake), is not part of `make bench`: it needs
# Data.Rentgen's venv and a Kafka 3.9 broker (its aiokafka client cannot talk to Kafka 4), see mk/bench.mk.

SERVE_ARGS ?=
BENCH_INTAKE_ARGS ?=

.PHONY: serve bench-intake

serve: $(VENV)/.installed ## Run the HTTP intake (lineage serve; SERVE_ARGS="--port 5000") into the configured topic
	$(VENV)/bin/lineage serve $(SERVE_ARGS)

bench-intake: $(VENV)/.installed $(RENTGEN_VENV)/.installed $(JARS)/kafka39/.fetched ## Intake benchmark: ours vs Data.Rentgen's http2kafka, one broker
	$(PY) -m benchmarks.intake $(BENCH_INTAKE_ARGS)
