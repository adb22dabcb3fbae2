# Trawl — `make run` starts everything on embedded defaults; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
ML_STAMP := $(VENV)/.installed-ml-$(shell cksum requirements-ml.txt | cut -d' ' -f1)
SCRAPYD_STAMP := $(VENV)/.installed-scrapyd-$(shell cksum requirements-scrapyd.txt | cut -d' ' -f1)

.PHONY: install run test lint format bench clean browser ml scrapyd-clients

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Trawl needs Python 3.11+"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-[0-9]*
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python -m project.devrun

# The suite on TEST_WORKERS pytest-xdist workers, whole test files each (tests/parallel.py keeps them apart: a Redis
# database and a test database per worker); TEST_WORKERS=0 runs it in one process, in file order.
TEST_WORKERS ?= 3
test: install lint browser ml scrapyd-clients
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

# The embedding category classifier (CPU torch). Installed when a local CPU torch wheel is at hand in PIP_FIND_LINKS
# (as on CI) or with TRAWL_ML=1: torch from the registry alone would pull gigabytes of CUDA. Without it the embedding
# test is skipped with its reason.
ml: install
	@if [ -e $(ML_STAMP) ]; then exit 0; fi; \
	if [ "$${TRAWL_ML:-}" = 1 ] || ls $${PIP_FIND_LINKS:-/nonexistent}/torch-*+cpu-*.whl >/dev/null 2>&1; then \
		sed 's/\[[^]]*\]//' requirements.txt > $(VENV)/constraints.txt && \
		$(BIN)/python -m pip install --quiet -r requirements-ml.txt -c $(VENV)/constraints.txt && \
		rm -f $(VENV)/.installed-ml-* && touch $(ML_STAMP); \
	else echo "requirements-ml.txt not installed: no local CPU torch wheel (TRAWL_ML=1 installs it anyway)"; fi

# The real scrapyd clients (scrapyd-deploy, python-scrapyd-api) for tests/e2e/test_scrapyd.py; requirements.txt as
# constraints, so they never move a pinned package (the test is skipped with its reason when they are missing).
scrapyd-clients: install
	@if [ -e $(SCRAPYD_STAMP) ]; then exit 0; fi; \
	sed 's/\[[^]]*\]//' requirements.txt > $(VENV)/constraints.txt && \
	$(BIN)/python -m pip install --quiet -r requirements-scrapyd.txt -c $(VENV)/constraints.txt && \
	rm -f $(VENV)/.installed-scrapyd-* && touch $(SCRAPYD_STAMP)

# Debian's packages the tests run for real, each installed only when missing and apt-get exists: Chromium (the
# dashboard's headless-browser test, rendering) and PgBouncer (tests/fleet: PostgreSQL through a transaction pooler).
browser:
	@MISSING=$$( [ -x /usr/bin/chromium ] || echo chromium; command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || echo pgbouncer ); \
	if [ -n "$$MISSING" ] && command -v apt-get >/dev/null; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo -n); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$MISSING; \
	fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python bench/run_all.py

clean:
	@# This installation's Redis keys first (they are namespaced by the database about to be removed); a Redis that
	@# is not running has nothing to clear.
	-test -x $(BIN)/python && test -d var && $(BIN)/python manage.py trawl_redis_clear
	rm -rf $(VENV) staticfiles var demo/site
