# tapeloop: make run (the demo on built-in data), make test.
GO      ?= go
BIN     := bin/tapeloop
PKG     := ./cmd/tapeloop
# Packages whose tests also run under the race detector.
RACE    := ./graphs/ ./ops/ ./internal/...

.PHONY: all build run test test-deps vet bench compare fuzz fmt-check build-cuda clean

all: build

build:
	$(GO) build -o $(BIN) $(PKG)

## run: build, then run the demo: every workload on built-in data, one table.
run: build
	./$(BIN) demo

## test: vet, the whole test suite, and the engine under the race detector.
test: test-deps
	$(GO) vet ./...
	$(GO) test ./...
	$(GO) test -race -short $(RACE)

# The tests compare against NumPy and check DOT with Graphviz where they are
# installed (and skip those checks where not). As root on Debian/Ubuntu,
# install them when missing; elsewhere say what would strengthen the tests.
test-deps:
	@missing=""; \
	/usr/bin/python3 -c 'import numpy, scipy' 2>/dev/null || missing="$$missing python3-numpy python3-scipy"; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing test peers:$$missing"; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	      || echo "warning: could not install$$missing; NumPy/Graphviz checks will be skipped"; \
	  else \
	    echo "note:$$missing not installed; NumPy/Graphviz checks will be skipped"; \
	  fi; \
	fi

vet:
	$(GO) vet ./...

## bench: the op and seed-size benchmarks, with the NumPy peer side by side.
bench: test-deps
	cd bench && $(GO) test -run '^$$' -bench . -benchtime 3x .
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 3 ./ops/ ./internal/cpukern/

## compare: tapeloop against the NumPy/SciPy peers on the same generated
## inputs, one table (BENCHMARKS.md); about ten minutes on 2 cores.
compare: build test-deps
	/usr/bin/python3 bench/compare.py $(BIN)

## fuzz: a short fuzzing session of the .npy reader.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzReader -fuzztime 30s ./internal/npy/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

build-cuda:
	@echo "tapeloop: the CUDA backend (issue 6) is not built yet; only the CPU build exists" >&2; exit 1

clean:
	rm -rf bin
