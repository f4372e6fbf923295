# WARP-K: `make run` and `make test` work on a fresh clone with nothing installed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test lint clean sandbox

install: $(STAMP) sandbox

# The evaluator runs candidates under bubblewrap (warpk/evaluator/sandbox.py). Installed here when
# this is a root Debian/Ubuntu box with apt; otherwise say how, and evaluation refuses to run
# unless evaluate.sandbox=process is given.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			(apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
			 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1)) && \
			echo "make: installed bubblewrap (the evaluator's sandbox)"; \
		fi; \
		command -v bwrap >/dev/null 2>&1 || echo "make: bubblewrap (bwrap) is missing: install it (e.g. apt-get install bubblewrap); until then evaluation needs evaluate.sandbox=process and the sandbox tests skip"; \
	}

# torch goes first: a plain `torch` requirement pulls a multi-GB CUDA build on a CPU box.
# If a torch is already importable (e.g. a GPU user's CUDA build), keep it.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP) sandbox
	$(PY) -m warpk $(ARGS)

# Two pytest-xdist workers, a test file per worker at a time (a module's fixtures run once).
# Each has a core of its own (tests/conftest.py; WARPK_TEST_OWN_CORES=0 shares them):
# the suite is CPU-bound then (both cores 98% busy, /proc/stat), and four workers were no faster
# than two, 990 against 1015 s, a C++ build starving past its 120 s limit (2026-12-07, session
# 33). `make test XDIST=` (or a bare `pytest`) runs it in one process.
XDIST ?= -n 2 --dist loadfile
test: $(STAMP) sandbox
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check warpk tests benchmarks sampler

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache

# Regenerate the committed gRPC stubs of the sampler (sampler/sampler_pb2*.py). grpcio-tools 1.84.0
# is the generator on purpose: generated code refuses a grpcio or protobuf older than its generator,
# and the GPU machine has grpcio 1.84.0 (FACTS.md). It lives in its own venv under build/ so the
# project's grpcio/protobuf stay as they are. `-I.` makes the stubs import `from sampler import ...`.
PROTO_VENV := build/protogen
.PHONY: proto
proto:
	test -x $(PROTO_VENV)/bin/python || $(PYTHON) -m venv $(PROTO_VENV)
	$(PROTO_VENV)/bin/python -m pip install --quiet "grpcio-tools==1.84.0"
	$(PROTO_VENV)/bin/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. \
		sampler/sampler.proto

# A one-node SLURM cluster on this machine (root; Debian/Ubuntu; installs slurm + munge via apt if
# missing), for `hydra/launcher=slurm_local` sweeps and the slurm tests. See scripts/slurm_local.sh.
.PHONY: slurm-up slurm-down
slurm-up:
	bash scripts/slurm_local.sh up

slurm-down:
	bash scripts/slurm_local.sh down

# The whole pipeline at small scale on a CPU (docs/reports.md): the bundled reference solutions
# evaluated over three seeds (the yardstick, arm evaluate/m0); seed 0 of the learning claim of
# docs/training.md re-run (the synthetic family, policy=small: M0 by SFT, M1 by GRPO from it, both
# evaluated held-out; printed beside the committed seed 0; M2/M3 train exactly like M1 on a CPU,
# which has no energy meter, so they are not re-run here); then M4 and M5, then the report of
# every run that finished. M4/M5 whose stage is not built yet print
# SKIPPED with the reason; an arm that fails (e.g. stage=runtime without its GPU calibration)
# prints FAILED, the report is still written, and `make reproduce` exits non-zero naming it.
# Runs: multirun/reproduce/; report: outputs/reproduce-report/REPORT.md.
REPRO := multirun/reproduce
REPRO_REPORT := outputs/reproduce-report
.PHONY: reproduce
reproduce: $(STAMP)
	rm -rf $(REPRO) $(REPRO_REPORT)
	OMP_NUM_THREADS=1 $(PY) -m warpk -m +experiment=measurement_repeatability seed=11,22,33 \
		hydra.sweep.dir=$(REPRO)/reference
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_learning.py --suite synthetic \
		--synthetic +experiment=synthetic_learning_claim --seeds 0 --k 8 --out $(REPRO)/learning \
		--against docs/data/learning-synthetic-claim-e49ae00/seed0
	@failed=""; \
	for arm in m4:runtime:runtime_vs_static m5:hrl:hierarchical_control; do \
		name=$${arm%%:*}; rest=$${arm#*:}; stage=$${rest%%:*}; preset=$${rest#*:}; \
		reason=$$($(PY) -c "from warpk.stages import NOT_YET; print(NOT_YET.get('$$stage', ''))"); \
		if [ -n "$$reason" ]; then echo "reproduce: SKIPPED $$name (stage=$$stage): $$reason"; \
		elif ! OMP_NUM_THREADS=1 $(PY) -m warpk -m +experiment=$$preset hydra.sweep.dir=$(REPRO)/$$name; then \
			echo "reproduce: FAILED $$name (stage=$$stage): its reason is above"; failed="$$failed $$name"; \
		fi; \
	done; \
	OMP_NUM_THREADS=1 $(PY) -m warpk stage=report results=$(REPRO) hydra.run.dir=$(REPRO_REPORT) || exit 1; \
	echo "reproduce: report in $(REPRO_REPORT)/REPORT.md"; \
	if [ -n "$$failed" ]; then echo "reproduce: arms that failed:$$failed"; exit 1; fi
