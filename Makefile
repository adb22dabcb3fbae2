# Trawl — `make run` starts everything on embedded defaults; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: install run test lint format bench clean

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Trawl needs Python 3.11+"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python -m project.devrun

test: install lint
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) staticfiles var demo/site
