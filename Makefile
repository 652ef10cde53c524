# The two commands a newcomer needs: `make run` and `make check`.
.PHONY: run check test bootstrap fmt bench openapi fuzz mutation

run: ## run API + admin + worker + beat on the embedded default (Ctrl-C stops all)
	scripts/bootstrap
	.venv/bin/python manage.py run_embedded

check: ## every check and test (ruff, mypy, migrations, pytest on PostgreSQL + Redis)
	scripts/check

test: check

bootstrap:
	scripts/bootstrap

fmt: ## fix formatting and the lint rules ruff can fix
	.venv/bin/ruff check --fix .
	.venv/bin/ruff format .

bench: ## print performance figures (never part of make check); appends to docs/benchmarks.md
	scripts/bootstrap
	scripts/ensure-services
	.venv/bin/python benchmarks/bench_engine.py
	.venv/bin/python benchmarks/bench_reads.py 100000 20
	.venv/bin/python benchmarks/bench_maas.py
	.venv/bin/python benchmarks/bench_workflows.py 1000 100 200
	.venv/bin/python benchmarks/bench_admin.py 100000
	.venv/bin/python benchmarks/bench_reconcile.py 10000
	.venv/bin/python benchmarks/bench_fleet.py

fuzz: ## the API fuzzing gate at 300 examples per operation, on PostgreSQL and SQLite (prints its seed)
	scripts/bootstrap
	scripts/ensure-services
	FUZZ_EXAMPLES=300 scripts/fuzz both

mutation: ## mutation score of the safety-bearing modules (never part of make check; docs/mutation.md)
	scripts/bootstrap
	scripts/ensure-services
	MAASCP_DATABASE_URL=$${MAASCP_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/maascp_mutation} \
	MAASCP_BROKER_URL=$${MAASCP_BROKER_URL:-redis://127.0.0.1:6379/14} \
	MAASCP_DATA_DIR=$${MAASCP_DATA_DIR:-$$PWD/var/mutation/data} \
	nice -n 15 .venv/bin/python scripts/mutation.py --sample $${MUTATION_SAMPLE:-0} \
	  $${MUTATION_SEED:+--seed $$MUTATION_SEED} $(MODULES)

openapi: ## regenerate docs/openapi.yaml after an API change (a test compares it with the code)
	.venv/bin/python manage.py spectacular --validate --fail-on-warn --file docs/openapi.yaml
