# Thin aliases; CI runs the same targets (.ci/run).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: run test browser proxy lint check fmt bench bench-task-cost bench-streaming bench-ingest bench-task-list bench-overload bench-sets soak clean

$(VENV)/.base-installed: requirements/base.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements/base.txt
	touch $@

$(VENV)/.dev-installed: requirements/dev.txt $(VENV)/.base-installed
	$(PY) -m pip install -q -r requirements/dev.txt
	touch $@

## run: install, migrate, create the demo data, start the web server (uvicorn) + qcluster on 127.0.0.1:$(PORT)
run: $(VENV)/.base-installed
	PORT=$(PORT) $(PY) manage.py serve --bootstrap

## test: install what the tests need, lint, check migrations, run the suite
test: $(VENV)/.dev-installed browser proxy lint check
	$(PY) -m pytest $(PYTEST_ARGS)

## browser: Debian's Chromium for the browser tests (Playwright drives it; never `playwright install`)
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

## proxy: Debian's nginx for the production-like test (TLS in front of the web processes; deploy/nginx/)
proxy:
	command -v nginx >/dev/null || (apt-get update && apt-get install -y nginx)

## bench: benchmarks (tests/bench/bench_*.py); they print figures and assert nothing about time
bench: $(VENV)/.dev-installed
	$(PY) -m pytest tests/bench -o python_files="bench_*.py" -s -q $(BENCH_ARGS)

# One benchmark each (docs/benchmarks.md). Set DATABASE_URL and REDIS_URL for PostgreSQL + Redis; BENCH_SHORT=1 for a quick run.
BENCH_ONE = $(PY) -m pytest -o python_files="bench_*.py" -s -q -p no:cacheprovider

## bench-task-cost: 200 × true via REST beside Slurm in the same run (issue 11)
bench-task-cost: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_task_cost.py $(BENCH_ARGS)

## bench-streaming: 100 tasks × 20 lines/s; line → API and → browser latency, lost/duplicated lines (PG + Redis)
bench-streaming: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_streaming.py $(BENCH_ARGS)

## bench-ingest: Runner events and log chunks acknowledged per second, v1 and batched v2
bench-ingest: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_runner_ingest.py $(BENCH_ARGS)

## bench-overload: 20 × the sustainable rate for 30 s: successes and fast 503s, the probes, recovery (issue 30)
bench-overload: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_overload.py $(BENCH_ARGS)

## bench-outputs: declared outputs to Swift beside `swift upload` (1 GB, 1,000 × 10 KB; the dev OpenStack up)
bench-outputs: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_outputs.py $(BENCH_ARGS)

## bench-sets: task sets beside Slurm job arrays: a 10,000-element set accepted, 1,000 × true run, CPU (issue 29)
bench-sets: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_sets.py $(BENCH_ARGS)

## bench-task-list: GET /api/v1/tasks with 100,000 tasks in the database
bench-task-list: $(VENV)/.dev-installed
	$(BENCH_ONE) tests/bench/bench_task_list.py $(BENCH_ARGS)

## soak: 1,000 tasks on five connections, cancels, retries and a rolling restart of every process (issue 16 item 3);
## set DATABASE_URL and REDIS_URL for 3 web + 2 worker processes; SOAK_TASKS=N for another size (the suite runs 40)
SOAK_TASKS ?= 1000
soak: $(VENV)/.dev-installed
	SOAK_TASKS=$(SOAK_TASKS) SOAK_SETTLE=$${SOAK_SETTLE:-3600} SOAK_TIMEOUT=$${SOAK_TIMEOUT:-7200} \
		$(PY) -m pytest tests/soak -s -q -p no:cacheprovider $(SOAK_ARGS)

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

check: $(VENV)/.dev-installed
	DJANGO_SETTINGS_MODULE=cloudpivot.settings.test $(PY) manage.py check
	DJANGO_SETTINGS_MODULE=cloudpivot.settings.test $(PY) manage.py makemigrations --check --dry-run

fmt: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) var

.PHONY: guest-image
## guest-image: the Debian 12 guest image of the real-guest tests (marker `guest`), from Debian's packages only;
## cached in var/guest/<hash of the build inputs>/ (a second run is instant); docs/guest-image.md
guest-image:
	bash deploy/guest-image/build.sh

.PHONY: guest-image-disk
## guest-image-disk: the same image as a whole disk with GRUB, for a real cloud's Glance (docs/guest-image.md)
guest-image-disk:
	bash deploy/guest-image/whole-disk.sh

.PHONY: openstack
## openstack: the development OpenStack (fake hypervisor) on 127.0.0.1; idempotent (deploy/dev/openstack/up.sh)
openstack:
	deploy/dev/openstack/up.sh
