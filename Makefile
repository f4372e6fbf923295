# WARP-K: `make run` and `make test` work on a fresh clone with nothing installed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test lint clean

install: $(STAMP)

# torch goes first: a plain `torch` requirement pulls a multi-GB CUDA build on a CPU box.
# If a torch is already importable (e.g. a GPU user's CUDA build), keep it.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m warpk $(ARGS)

test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(PYTEST_ARGS)

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
