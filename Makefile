# genq: make run starts the local stack, make test runs every test.
SHELL := bash
.DEFAULT_GOAL := build

VARIANT ?= B
PORT    ?= 8080
# cgo builds one thing: onnxruntime_go's C shim (ONNX Runtime itself is
# loaded at run time). ggml and llama.cpp are built by
# scripts/build-llama.sh with their own flags and bound without cgo.
# Containers set a portable -march instead.
MARCH        ?= native
CGO_CFLAGS   ?= -O3 -march=$(MARCH)
CGO_CXXFLAGS ?= -O3 -march=$(MARCH)
export CGO_ENABLED := 1
export CGO_CFLAGS CGO_CXXFLAGS

ORT_DIR := lib/onnxruntime
ORT_LIB := $(ORT_DIR)/libonnxruntime.so.1
export ONNXRUNTIME_LIB ?= $(CURDIR)/$(ORT_LIB)

# The text engine: llama.cpp pinned in scripts/llama.env, built for this
# CPU by scripts/build-llama.sh into ~/.cache/genq/llama.cpp (GENQ_CACHE),
# once per pin and flags. lib/llama links to its libraries, which the worker
# and the tests load from LLAMA_LIB_DIR; lib/llama-bin to the peers that the
# tests and benchmarks hold genq against (llama-server, llama-batched-bench).
LLAMA_DIR := lib/llama
export LLAMA_LIB_DIR ?= $(CURDIR)/$(LLAMA_DIR)
export LLAMA_SERVER ?= $(CURDIR)/$(LLAMA_DIR)-bin/llama-server
# The portable build (the CPU worker image's: one CPU backend per x86-64
# level), whose every variant this CPU can run make test decodes on; and
# the release without genq's patches, the peer the parity test and make
# bench hold genq to (docs/engine.md).
PORTABLE_DIR := lib/llama-portable
STOCK_DIR    := lib/llama-stock
export LLAMA_PORTABLE_LIB_DIR ?= $(CURDIR)/$(PORTABLE_DIR)
export LLAMA_STOCK_SERVER ?= $(CURDIR)/$(STOCK_DIR)-bin/llama-server

GO_TEST_FLAGS ?= -timeout 20m
FUZZTIME ?= 50000x

.PHONY: build configuration engine engine-tools otelcol engine-portable engine-stock test test-openai test-agents test-ui test-run-local compose-test fuzz run chaos chaos-cluster bench bench-multiturn bench-image-engines bench-fairshare bench-embeddings bench-route bench-text bench-image bench-schemas bench-gpu gpu-kit clean onnxruntime

build: bin/api bin/worker bin/genqctl

bin/api bin/worker bin/genqctl: FORCE
	go build -trimpath -o $@ ./cmd/$(@F)

FORCE:

# docs/configuration.md, the reference of every setting, written from the
# settings' declarations (internal/config); make test fails when the two
# disagree (internal/config's TestConfigurationDoc).
configuration:
	go run ./internal/config/gen -o docs/configuration.md

# The CPU build of ONNX Runtime, from the npm package onnxruntime-node,
# fetched only when missing.
$(ORT_LIB):
	scripts/fetch-onnxruntime.sh $(ORT_DIR)

onnxruntime: $(ORT_LIB)

# The libraries the worker loads. Exits at once when the cache holds this
# pin's build; about 4 min on 2 cores when it does not (docs/engine.md).
engine:
	@d=$$(scripts/build-llama.sh --flavour cpu-native) && mkdir -p lib && \
		ln -sfn "$$d/lib" $(LLAMA_DIR)

# The same build with llama.cpp's tools beside it (llama-server,
# llama-batched-bench): the peers of the tests and benchmarks. A cache
# that holds the libraries alone is rebuilt once with them.
engine-tools:
	@d=$$(scripts/build-llama.sh --flavour cpu-native --tools) && mkdir -p lib && \
		ln -sfn "$$d/lib" $(LLAMA_DIR) && ln -sfn "$$d/bin" $(LLAMA_DIR)-bin

# Libraries only; about 4 min on 2 cores when the cache lacks them.
engine-portable:
	@d=$$(scripts/build-llama.sh --flavour cpu-portable) && mkdir -p lib && \
		ln -sfn "$$d/lib" $(PORTABLE_DIR)

# llama.cpp as released (no scripts/llama-patches, no BLAS module), with
# its llama-server.
engine-stock:
	@d=$$(scripts/build-llama.sh --stock --flavour cpu-native --tools) && mkdir -p lib && \
		ln -sfn "$$d/lib" $(STOCK_DIR) && ln -sfn "$$d/bin" $(STOCK_DIR)-bin

# The OpenTelemetry Collector the trace tests export to (test/otelcol),
# built from the Go module proxy into the cache once; about 75 s on 2
# cores when the cache lacks it (docs/observability.md).
otelcol:
	@scripts/build-otelcol.sh >/dev/null

# ajv, the JSON-schema validator the structured-output tests check every
# constrained answer with, from test/structured's lock file.
AJV := test/structured/node_modules/.package-lock.json
$(AJV): test/structured/package-lock.json
	npm ci --prefix test/structured --no-audit --no-fund --silent

# Llama 3's 128,256 tokens (npm's llama3-tokenizer-js), so the structured
# tests check masks over a real vocabulary, fetched only when missing.
LLAMA3_VOCAB := .cache/llama3-vocab.hex
$(LLAMA3_VOCAB):
	scripts/fetch-vocab.sh $@

# A short run of each fuzz target, then every test, against the real
# nats-server, llama.cpp (and its llama-server as the peer), ggml, ONNX
# Runtime and the OpenTelemetry Collector. gotestsum closes with the counts.
test: engine-tools engine-portable engine-stock otelcol $(ORT_LIB) $(AJV) $(LLAMA3_VOCAB)
	$(MAKE) --no-print-directory fuzz
	GENQ_REQUIRE_ORT=1 GENQ_REQUIRE_AJV=1 GENQ_REQUIRE_PEER=1 GENQ_REQUIRE_OTELCOL=1 go tool gotestsum --format pkgname-and-test-fails -- $(GO_TEST_FLAGS) ./...

fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

# go vet, then staticcheck at the version go.mod's tool block pins; CI runs
# both. Neither needs the engine: Go binds it at run time.
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
		if [ -n "$$unformatted" ]; then echo "not gofmt'd (gofmt -w them):"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

# The /v1 routes through the official openai npm package and Python's
# urllib, over bin/api and bin/worker with the tiny model; the embeddings
# are held to llama-server, which engine-tools builds. Needs Node and
# npm; make test covers the same behaviour in Go (internal/e2e).
test-openai: build engine-tools
	test/openai/run.sh

# Claude Code, then OpenAI's Codex CLI, from npm (test/agents' lock file)
# against make run's stack at its defaults, through a proxy that records
# every request's size and answer (results/agents/*.jsonl);
# docs/agents.md.
test-agents: build engine
	test/agents/run.sh
	test/agents/run-openai.sh

# The web UI (/ui/) in Debian's chromium, headless, driven by puppeteer-core
# over bin/api and bin/worker with the tiny models; writes docs/ui-*.png.
test-ui: build engine $(ORT_LIB)
	test/ui/run.sh

# make run as a newcomer meets it: a taken port named by its variable,
# every port moved, Ctrl-C stopping the worker before the api, and its
# process group killed (SIGKILL, or SIGTERM then SIGKILL) leaving no
# process and no port behind.
test-run-local: build engine
	scripts/run-local-test.py

# The compose stack on a real Docker engine (not part of make test): builds
# the api and CPU worker images, runs the cpu profile and checks it from
# outside, then takes it down. scripts/compose-test.sh says what it needs.
compose-test:
	scripts/compose-test.sh

# The whole stack in the foreground: embedded NATS, the api, one worker.
# It fetches ONNX Runtime only for the engine that loads it (VARIANT=C
# with IMAGE_ENGINE=onnx) and builds no llama.cpp tools.
run: build engine $(if $(and $(filter C c,$(VARIANT)),$(filter onnx,$(IMAGE_ENGINE))),$(ORT_LIB))
	VARIANT=$(VARIANT) PORT=$(PORT) scripts/run-local.sh

bench-text: engine
	go test -run '^$$' -bench . -benchtime 3x ./internal/textgen/

bench-image: $(ORT_LIB)
	go test -run '^$$' -bench . ./internal/onnx/

# Structured output over every schema at hand (docs/benchmarks.md,
# "Structured output: bounded compile, masks and memory"): the suite, the
# repo's corpus, the npm corpus when GENQ_SCHEMA_CORPUS names the folder
# scripts/fetch-schema-corpus.sh filled, and the tool sets make
# test-agents recorded (results/agents/tools-*.jsonl) unless
# GENQ_AGENT_TOOLS names others.
bench-schemas:
	GENQ_AGENT_TOOLS="$${GENQ_AGENT_TOOLS-$$(ls $(CURDIR)/results/agents/tools-*.jsonl 2>/dev/null | paste -sd:)}" \
		go test -run '^$$' -bench Schemas -benchtime 1x -timeout 60m ./internal/structured/

# End to end on this machine; rewrites docs/benchmarks.md's measured
# section and docs/benchmarks.png.
bench: build engine-tools engine-stock $(ORT_LIB)
	go run ./test/bench --report docs/benchmarks.md --chart docs/benchmarks.png

# make bench's multi-turn step alone (docs/benchmarks.md): genq with the
# prefix cache on and off, and llama-server as released (LLAMA_STOCK_SERVER,
# make engine-stock); rewrites only its section.
bench-multiturn: build engine-tools engine-stock
	go run ./test/bench --only multiturn --report docs/benchmarks.md

# make bench's image engines step alone (docs/benchmarks.md): ggml against
# ONNX Runtime in process on the same weights; rewrites only its section.
bench-image-engines: engine $(ORT_LIB)
	go run ./test/bench --only image-engines --report docs/benchmarks.md

# Fair share between tenants (docs/benchmarks.md): two tenants, one sending
# ten times the other's load, on one api and worker, then two of each;
# rewrites only its section.
bench-fairshare: build engine-tools engine-stock
	go run ./test/bench --only fairshare --report docs/benchmarks.md

# Embeddings against llama-server --embedding on the same file
# (docs/benchmarks.md): one input a request and 64; rewrites only its
# section.
bench-embeddings: build engine-tools engine-stock
	go run ./test/bench --only embeddings --report docs/benchmarks.md

# Routing by prefix (docs/benchmarks.md): the multi-turn workload on two
# workers with ROUTE_BY_PREFIX on and off; rewrites only its section.
bench-route: build engine-tools engine-stock
	go run ./test/bench --only route --report docs/benchmarks.md

# The GPU benchmark's kit: binaries for any x86-64-v3 machine (xz, so the
# kit fits a small upload), the pinned llama.cpp sources for building the
# engine's cuda flavour there (scripts/build-llama.sh --export-src: no
# other GPUs' backends, models or docs; the image engine runs on its ggml
# too), and the bandwidth probe. The GPU machine needs
# CUDA, CMake and Ninja, not Go.
GPU_KIT  ?= .gpu
GPU_WORK ?= /tmp/genq-gpu
gpu-kit:
	rm -rf $(GPU_KIT) && mkdir -p $(GPU_KIT)/bin
	CGO_CFLAGS="-O3 -march=x86-64-v3" CGO_CXXFLAGS="-O3 -march=x86-64-v3" \
		go build -trimpath -ldflags="-s -w" -o $(GPU_KIT)/bin/ ./cmd/api ./cmd/worker ./cmd/genqctl ./test/benchgpu
	xz -T0 -6 $(GPU_KIT)/bin/*
	scripts/build-llama.sh --export-src $(GPU_KIT)/llama-src.tar.gz
	cp scripts/gpu/copybw.cu $(GPU_KIT)/
	du -sh $(GPU_KIT)

# Text throughput on this machine's CUDA GPU through HTTP (docs/benchmarks-gpu.md
# says how to run it on a machine without Go); rewrites the page's figures.
bench-gpu: gpu-kit
	GPU_KIT=$(GPU_KIT) GPU_WORK=$(GPU_WORK) scripts/bench-gpu.sh run
	go run ./test/benchgpu report --in $(GPU_WORK)/results --doc docs/benchmarks-gpu.md

clean:
	rm -rf bin .genq $(GPU_KIT)

# Fault scenarios over real processes; rewrites the figures in docs/reliability.md.
chaos: engine $(ORT_LIB)
	go run ./test/chaos --report docs/reliability.md

# The same over a 3-node NATS cluster, one node failing under load (about
# 3 min on 2 cores); rewrites the cluster figures in docs/reliability.md.
chaos-cluster: engine $(ORT_LIB)
	go run ./test/chaos --cluster --report docs/reliability.md
