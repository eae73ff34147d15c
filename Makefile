# Everything runs from a virtual environment that `make setup` builds on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
AUTOTUNE := $(VENV)/bin/autotune

.PHONY: setup demo test lint seed-study check-memory fuzz fuzz-api fuzz-export clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

# A real job on the default device (PoCL on a machine without a GPU).
demo: setup
	$(AUTOTUNE) devices
	$(AUTOTUNE) search --device 0 --filter-width 3,5 --image-size 512x512 --trials 30
	$(AUTOTUNE) best --device 0

# tests/test_postgres.py needs a PostgreSQL server: checks/postgres.sh installs and starts one;
# tests/test_report.py needs headless Chromium: checks/chromium.sh installs it.
# Two pytest workers (pytest-xdist): most of a test is one process compiling kernels, so two
# cores take the suite in about half the time; tests share only the device lock and servers.
test: setup
	bash checks/postgres.sh
	bash checks/chromium.sh
	$(PY) -m ruff check autotune tests bench checks db
	$(PY) -m ruff format --check autotune tests bench checks db
	$(PY) -m pytest -q -n 2

lint: setup
	$(PY) -m ruff check autotune tests bench checks db
	$(PY) -m ruff format --check autotune tests bench checks db

# Every template path under Oclgrind (apt-get install oclgrind); also part of `make test`.
check-memory: setup
	$(PY) checks/memory.py

# Random problems (pixel types, channels, frames, borders, anchors, rectangular filters,
# awkward sizes) x random valid configs, each verified against the float64 reference.
fuzz: setup
	$(PY) checks/fuzz_kernels.py --seeds 0-399
	$(PY) checks/fuzz_kernels.py --family separable --seeds 0-199

# Random calls of convolve(), Convolver and plan() as a user makes them (pixel types, channels,
# batches, awkward sizes and layouts, filters, anchors, borders, flip, NaN), each compared with
# scipy.ndimage and cv2.filter2D after the same rounding; then again with a database of random
# tuned kinds, so the calls borrow related kinds' kernels.
fuzz-api: setup
	$(PY) checks/fuzz_api.py --seeds 0-399
	$(PY) checks/fuzz_api.py --seeds 0-199 --random-bests 80 --bests-seed 1

# Random problems x random valid configs of both families, each stored as the best kernel of a
# SQLite database and taken out with `autotune export`; the kernel is then run from its manifest
# alone (and every 10th through the C host example, built with gcc) against the float64
# reference, and the manifest checked against the problem and the kernel's signature.
fuzz-export: setup
	$(PY) checks/fuzz_export.py --seeds 0-299 --jobs 2

seed-study: setup
	$(PY) bench/seed_study.py --device 0

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
