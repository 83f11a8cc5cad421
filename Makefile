# so101-sim2real workspace commands. Every target creates/updates the environment (.venv) first.
VENV     ?= .venv
PYTHON   := $(VENV)/bin/python
STAMP    := $(VENV)/.so101-env-stamp
ENV_DEPS := scripts/bootstrap_env.sh requirements/constraints.txt requirements/lerobot.txt \
            requirements/workspace.txt $(wildcard src/*/setup.py)

.PHONY: env test demo bench docs lint colcon-build clean-env help

help:
	@echo "make env     create/update the pinned environment in $(VENV)"
	@echo "make test    environment + lint + type check + every test (what CI runs)"
	@echo "make demo    the main job on the embedded default (virtual SO-101 + MuJoCo), with its live gap twin and web view"
	@echo "make bench   control-path benchmarks as JSON lines"
	@echo "make docs    regenerate the READMEs' parts derived from the code (tables, formats, schemas)"
	@echo "make lint    ruff and mypy over the whole tree"

$(STAMP): $(ENV_DEPS)
	VENV=$(VENV) bash scripts/bootstrap_env.sh
	touch $(STAMP)

env: $(STAMP)

test: $(STAMP)
	VENV=$(VENV) bash scripts/run_tests.sh

demo: $(STAMP)
	VENV=$(VENV) bash scripts/with_env.sh so101 demo --web

bench: $(STAMP)
	VENV=$(VENV) bash scripts/with_env.sh so101 bench --isolated

docs: $(STAMP)
	VENV=$(VENV) bash scripts/with_env.sh python -m so101_apps.docs

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	VENV=$(VENV) bash scripts/with_env.sh bash scripts/run_mypy.sh

colcon-build: $(STAMP)
	VENV=$(VENV) bash scripts/with_env.sh colcon build --base-paths src --build-base build --install-base install

clean-env:
	rm -rf $(VENV)
