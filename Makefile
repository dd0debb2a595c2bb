# tapeloop: make run (the demo on built-in data), make test (about ten
# minutes on 2 cores), make test-full (everything, with the full-size runs;
# CI runs both).
GO      ?= go
BIN     := bin/tapeloop
PKG     := ./cmd/tapeloop
PYLIB   := python/tapeloop/libtapeloop.so
# Packages whose tests also run under the race detector.
RACE    := ./graphs/affinity/ ./graphs/interp/ ./ops/... ./internal/...
# What the binaries are built from (the release's VERSION file among
# them): a file target below is rebuilt only when one of these is newer
# (the tests, the Python package and bin/ are not among them).
SOURCES := $(shell find . \( -path ./bin -o -path ./python -o -path ./.git -o -name testdata \) -prune -o \
	\( -name '*.go' -not -name '*_test.go' -o -name '*.c' -o -name '*.h' -o -name '*.s' -o -name '*.ptx' \) -print) go.mod go.sum \
	internal/version/VERSION

# SHORT is the go test flag that leaves out the full-size runs, the long
# soaks and the slow fault trials (test-full sets it empty).
SHORT   ?= -short
# The tests come in two tiers: the packages' own (UNIT), and the CLI's,
# which build and run the tapeloop binary end to end (E2E_PKG) and get a
# time limit sized for a loaded 2-core machine (E2E_TIMEOUT) rather than
# go test's default ten minutes. Only the E2E tier may take minutes.
UNIT        = $(shell $(GO) list ./... | grep -v '/cmd/tapeloop$$')
E2E_PKG     := ./cmd/tapeloop/
E2E_TIMEOUT ?= 30m

.PHONY: all build run test test-full test-arm64 check-darwin test-neon python python-cuda test-python test-pip test-emu test-deps compare-deps vet bench bench-check compare fuzz fmt-check build-cuda gpu-bin gpu-bin-emu gpu-check-dry check-cuda generate clean

all: build

build: $(BIN)

$(BIN): $(SOURCES)
	$(GO) build -o $(BIN) $(PKG)

## run: build, then run the demo: every workload on built-in data, one table.
run: build
	./$(BIN) demo

## test: vet, the test suite without its full-size runs, long soaks and
## slow fault trials (go test -short; every kind of fault keeps a fast
## case), then the CLI's end-to-end tests (the built binary run as a
## user runs it) on their own under E2E_TIMEOUT, the engine under the race
## detector, the GPU flavour on the CUDA emulator, and the Python package;
## about 13 minutes on 2 cores (every test run, none cached).
test: test-deps
	$(GO) vet ./...
	$(GO) test $(SHORT) $(UNIT)
	$(GO) test $(SHORT) -timeout $(E2E_TIMEOUT) $(E2E_PKG)
	$(GO) test -race -short $(RACE)
	$(MAKE) --no-print-directory test-emu SHORT=$(SHORT)
	$(MAKE) --no-print-directory test-python

## test-full: all of the above with everything make test leaves out: the
## full-size runs, the long soaks, the slow fault trials and the job
## scripts of docs/cluster.md on a real one-node SLURM cluster (as root,
## scripts/install-slurm.sh installs slurm-wlm and munge when missing;
## elsewhere that test is skipped); tens of minutes.
test-full:
	@scripts/install-slurm.sh
	$(MAKE) --no-print-directory test SHORT=

## test-emu: the GPU twins and `--device cuda` through the CLI on the CUDA
## emulator (build tag tapeloop_cudaemu: the kernels run on the CPU, cuBLAS
## and cuFFT are reference loops; no GPU or CUDA toolkit needed, g++ is):
## the ops' conformance suites on the CPU and the emulated GPU, the twins'
## own tests, the emulator's, the compiled in-process objects' and the
## CLI's.
test-emu:
	@if command -v g++ >/dev/null 2>&1; then \
	  set -x; $(GO) vet -tags tapeloop_cudaemu ./... && \
	  $(GO) test $(SHORT) -tags tapeloop_cudaemu -run 'CUDA|Emulat|BadInput|Conformance' ./cuda/ ./ops/... ./internal/filejob/ && \
	  $(GO) test $(SHORT) -timeout $(E2E_TIMEOUT) -tags tapeloop_cudaemu -run 'CUDA|Emulat|BadInput|Conformance' $(E2E_PKG); \
	else echo "note: g++ not installed; the emulated GPU tests are skipped"; fi

## test-arm64: the linux/arm64 build, cross-compiled with
## aarch64-linux-gnu-gcc and run under qemu-user (scripts/test-arm64.sh):
## the kernels' tests and the ops' conformance suites, every workload
## through the CLI compared with this machine's binary, two shards merged
## bit for bit, and the emulated GPU flavour cross-built with the ops'
## conformance suites run on it; six to ten minutes on 2 cores. Needs
## gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, libc6-dev-arm64-cross and
## qemu-user (scripts/install-arm64-cross.sh installs them as root).
test-arm64:
	GO=$(GO) SHORT=$(SHORT) scripts/test-arm64.sh

## check-darwin: type-check the macOS build on Linux: go vet of every
## package with GOOS=darwin (amd64, and arm64 where aarch64-linux-gnu-gcc
## is installed), the C compiled against Linux's headers by
## scripts/darwin-cc.sh; nothing is linked or run. A few minutes.
check-darwin:
	GOOS=darwin GOARCH=amd64 CGO_ENABLED=1 CC=$(CURDIR)/scripts/darwin-cc.sh $(GO) vet ./...
	@if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then \
	  set -x; GOOS=darwin GOARCH=arm64 CGO_ENABLED=1 DARWIN_CC=aarch64-linux-gnu-gcc CC=$(CURDIR)/scripts/darwin-cc.sh $(GO) vet ./...; \
	else echo "note: aarch64-linux-gnu-gcc not installed; darwin/arm64 is not checked"; fi

## test-neon: the arm64 NEON kernels on their own, without Go
## (internal/cpukern/testdata/neon_test.c: each against a reference loop
## on random odd sizes), built with the cross compiler and run under qemu
## on a CPU with the dot-product instructions (max) and one without
## (cortex-a72); then the same test built for this machine when it is
## x86-64 (the AVX-512 matrix product against the same reference, so both
## give a pair the same value). Timings under qemu mean nothing.
NEON_CC  ?= aarch64-linux-gnu-gcc
QEMU_ARM ?= qemu-aarch64 -L /usr/aarch64-linux-gnu
NEON_SRC := $(wildcard internal/cpukern/*_neon.c) internal/cpukern/testdata/neon_test.c
test-neon:
	@mkdir -p bin
	@if command -v $(NEON_CC) >/dev/null 2>&1 && command -v $(firstword $(QEMU_ARM)) >/dev/null 2>&1; then \
	  set -ex; $(NEON_CC) -O3 -std=gnu11 -Wall $(NEON_SRC) -lm -o bin/neon_test.arm64; \
	  for cpu in max cortex-a72; do $(QEMU_ARM) -cpu $$cpu bin/neon_test.arm64; done; \
	else echo "note: $(NEON_CC) or $(firstword $(QEMU_ARM)) not installed; the NEON kernels are not tested"; fi
	@if [ "$$(uname -m)" = x86_64 ]; then \
	  set -ex; cc -O3 -std=gnu11 internal/cpukern/gemm.c internal/cpukern/testdata/neon_test.c -lm -o bin/neon_test.host; \
	  bin/neon_test.host; fi

# The tests compare against NumPy/SciPy (DICOM series: pydicom, dcm2niix),
# run the Python package's tests with pytest (and its objects on a Dask
# cluster: python3-distributed), install it with pip in a virtual
# environment (python3-venv, python3-setuptools, python3-wheel), register
# a real skull CT (invesalius-examples' Cranium, scripts/cranium.sh),
# write NIfTI files with nibabel and render DRRs with plastimatch as a peer,
# check DOT with Graphviz and run the
# GPU kernels under the CPU emulator (g++) where those are installed (and
# skip those checks where not). As root on Debian/Ubuntu, install them when
# missing; elsewhere say what would strengthen the tests.
test-deps:
	@missing=""; \
	/usr/bin/python3 -c 'import numpy, scipy' 2>/dev/null || missing="$$missing python3-numpy python3-scipy"; \
	/usr/bin/python3 -c 'import pydicom' 2>/dev/null || missing="$$missing python3-pydicom"; \
	command -v dcm2niix >/dev/null 2>&1 || missing="$$missing dcm2niix"; \
	/usr/bin/python3 -c 'import nibabel' 2>/dev/null || missing="$$missing python3-nibabel"; \
	command -v plastimatch >/dev/null 2>&1 || missing="$$missing plastimatch"; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	command -v g++ >/dev/null 2>&1 || missing="$$missing g++"; \
	/usr/bin/python3 -c 'import pytest' 2>/dev/null || missing="$$missing python3-pytest"; \
	/usr/bin/python3 -c 'import setuptools, wheel' 2>/dev/null || missing="$$missing python3-setuptools python3-wheel"; \
	/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	/usr/bin/python3 -c 'import distributed' 2>/dev/null || missing="$$missing python3-distributed"; \
	[ -f /usr/share/doc/invesalius-examples/examples/Cranium.inv3 ] || missing="$$missing invesalius-examples"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing test peers:$$missing"; \
	    apt-get update -qq >/dev/null; \
	    for p in $$missing; do \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$p >/dev/null \
	        || echo "warning: could not install $$p; the checks needing it will be skipped"; \
	    done; \
	  else \
	    echo "note:$$missing not installed; the checks needing them will be skipped"; \
	  fi; \
	fi

vet:
	$(GO) vet ./...

## python: the C ABI (./capi) as python/tapeloop/libtapeloop.so, next to the
## pure-Python package, for working on it in place: PYTHONPATH=python
## python3 -c "import tapeloop". (pip install ./python builds the same
## library into the installed package itself: python/setup.py.)
python: $(PYLIB)

$(PYLIB): $(SOURCES)
	$(GO) build -buildmode=c-shared -o $(PYLIB) ./capi

## test-python: the Python package's tests (pytest, with /usr/bin/python3 and
## Debian's python3-numpy and python3-pytest) against NumPy, SciPy and
## bin/tapeloop; skipped with one note where those are missing (under a
## minute, the 1,000-call runs included: make test and make test-full run
## the same Python tests).
test-python:
	@if /usr/bin/python3 -c 'import numpy, pytest' 2>/dev/null; then \
	  $(MAKE) --no-print-directory $(BIN) $(PYLIB) && \
	  cd python && /usr/bin/python3 -m pytest -q tests; \
	else echo "note: /usr/bin/python3 with numpy and pytest (python3-numpy, python3-pytest) not found; the Python tests are skipped"; fi

## test-pip: the Python package as users install it (scripts/test-pip.sh):
## pip install --no-index --no-build-isolation ./python into a fresh
## virtual environment, which builds the library with Go, then a workload
## checked against NumPy, __version__ and the wheel's platform tag from
## outside the repository; skipped with one note where python3's venv,
## NumPy, setuptools or wheel is missing. A minute or two on 2 cores.
test-pip:
	PYTHON=/usr/bin/python3 scripts/test-pip.sh

## bench: the op and full-size benchmarks, with the NumPy peer side by side.
bench: test-deps
	cd bench && $(GO) test -run '^$$' -bench . -benchtime 3x .
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 3 ./ops/... ./internal/cpukern/

## bench-check: every benchmark once (-benchtime 1x) with -short (the
## full-size affinity, formula and 8-bit process benchmarks at a quarter of
## their images or at a size of seconds), so that a benchmark that fails,
## or whose sides stop agreeing, fails; the peers (NumPy, SciPy) are
## skipped where missing. About 4 minutes on 2 cores.
bench-check:
	$(GO) test -short -run '^$$' -bench . -benchtime 1x ./bench/... ./ops/... ./graphs/... ./internal/...

## compare: tapeloop against its peers, each at its best (NumPy/SciPy with
## OpenBLAS set to the CPU's real kernels, FAISS for top-k, plastimatch for
## DRRs), on the same generated inputs, three interleaved runs of each side
## per row, one table (BENCHMARKS.md); tens of minutes on 2 cores.
## PLOT=DIR also draws each row's times, tapeloop against its peer, into DIR.
compare: build compare-deps
	/usr/bin/python3 bench/compare.py $(BIN) $(if $(PLOT),--plot $(PLOT))

# The peers bench/compare.py runs: NumPy and SciPy, FAISS (exact k-NN) and
# plastimatch (DRRs), all from Debian. As root on Debian/Ubuntu, install
# them when missing; elsewhere say which rows will be skipped. (ASTRA,
# python3-astra-toolbox in Debian contrib, is not among them: its 3-D
# cone-beam projectors need CUDA, which Debian's build lacks.)
compare-deps:
	@missing=""; \
	/usr/bin/python3 -c 'import numpy, scipy' 2>/dev/null || missing="$$missing python3-numpy python3-scipy"; \
	/usr/bin/python3 -c 'import faiss' 2>/dev/null || missing="$$missing python3-faiss"; \
	command -v plastimatch >/dev/null 2>&1 || missing="$$missing plastimatch"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing compare peers:$$missing"; \
	    apt-get update -qq >/dev/null; \
	    for p in $$missing; do \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$p >/dev/null \
	        || echo "warning: could not install $$p; the rows needing it will be skipped"; \
	    done; \
	  else \
	    echo "note:$$missing not installed; the rows needing them will be skipped"; \
	  fi; \
	fi

## fuzz: a short fuzzing session of every reader (FUZZTIME each, 10s by
## default): .npy, .npz, NIfTI, MetaImage, DICOM, geometry JSON and shard
## metadata. Each asserts no panic, one-line errors and allocation bounded
## by the input's size; their seed corpora are in testdata/fuzz/. Then the
## formulas: whatever parses computes in the evaluator what the reference
## computes (FuzzFormula).
FUZZTIME ?= 10s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The GPU flavour: build tag tapeloop_cuda (not `cuda`, which would also
# switch on Gorgonia's own CUDA code and its cuDNN dependency). cgo flags
# quiet gorgonia.org/cu's deprecation warnings.
CUDA_TAG := tapeloop_cuda
CUDA_ENV := CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations -Wno-implicit-function-declaration"

## build-cuda: bin/tapeloop-cuda, the GPU flavour (needs the CUDA toolkit
## headers to build; runs only where a GPU and its driver are).
build-cuda:
	$(CUDA_ENV) $(GO) build -tags $(CUDA_TAG) -o bin/tapeloop-cuda $(PKG)

## gpu-bin: everything scripts/gpu-check.sh runs on a GPU machine (which has
## no Go toolchain): the GPU binary, the GPU test binaries of ops and
## ops/pairwise and the GPU
## build of the Python package's library. All are stripped (-s -w), to
## travel light to the GPU machine.
gpu-bin:
	$(CUDA_ENV) $(GO) build -ldflags='-s -w' -tags $(CUDA_TAG) -o bin/tapeloop-cuda $(PKG)
	$(CUDA_ENV) $(GO) test -c -ldflags='-s -w' -tags $(CUDA_TAG) -o bin/ops-cuda.test ./ops
	$(CUDA_ENV) $(GO) test -c -ldflags='-s -w' -tags $(CUDA_TAG) -o bin/pairwise-cuda.test ./ops/pairwise
	$(CUDA_ENV) $(GO) build -ldflags='-s -w' -tags $(CUDA_TAG) -buildmode=c-shared -o bin/libtapeloop-cuda.so ./capi

## python-cuda: the Python package's library from the GPU flavour, in place
## of the CPU one (needs the CUDA toolkit headers; device="cuda" then runs
## where a GPU and its driver are).
python-cuda:
	$(CUDA_ENV) $(GO) build -tags $(CUDA_TAG) -buildmode=c-shared -o $(PYLIB) ./capi

## gpu-bin-emu: the same binaries from the CUDA emulator build, in
## bin/emu/, and gpu-check-dry: scripts/gpu-check.sh rehearsed with them at
## small sizes (no GPU needed).
gpu-bin-emu:
	$(GO) build -tags tapeloop_cudaemu -o bin/emu/tapeloop-cuda $(PKG)
	$(GO) test -c -tags tapeloop_cudaemu -o bin/emu/ops-cuda.test ./ops
	$(GO) test -c -tags tapeloop_cudaemu -o bin/emu/pairwise-cuda.test ./ops/pairwise
	$(GO) build -tags tapeloop_cudaemu -buildmode=c-shared -o bin/emu/libtapeloop-cuda.so ./capi

gpu-check-dry: gpu-bin-emu
	BIN=bin/emu GPU_CHECK_SMALL=1 PYTHON=/usr/bin/python3 scripts/gpu-check.sh

## check-cuda: build and vet the GPU flavour (no GPU needed).
check-cuda:
	$(CUDA_ENV) $(GO) build -tags $(CUDA_TAG) ./...
	$(CUDA_ENV) $(GO) vet -tags $(CUDA_TAG) ./...
	$(CUDA_ENV) $(GO) test -c -tags $(CUDA_TAG) -o /dev/null ./ops
	$(CUDA_ENV) $(GO) test -c -tags $(CUDA_TAG) -o /dev/null ./ops/pairwise

## generate: the formula evaluator's generated files (go generate), then the
## kernels' PTX (nvcc); commit the result. Each
## .ptx starts with Go's generated-file line (PTX takes // comments);
## cuda/ptx_test.go compiles with NVCC_FLAGS too, read from here.
NVCC_FLAGS := -ptx -arch=compute_80 -O3
generate:
	$(GO) generate ./internal/formula
	@set -e; for f in cuda/kernels/*.cu; do \
	  out=$${f%.cu}.ptx; \
	  echo "nvcc $(NVCC_FLAGS) -o $$out $$f"; \
	  nvcc $(NVCC_FLAGS) -o $$out.tmp $$f; \
	  { echo "// Code generated by nvcc from $$(basename $$f); DO NOT EDIT."; cat $$out.tmp; } >$$out; \
	  rm -f $$out.tmp; \
	done

clean:
	rm -rf bin $(PYLIB) python/tapeloop/libtapeloop.h
