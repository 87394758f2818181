#!/usr/bin/env bash
# run.sh: genq's /v1 routes against the official openai npm package,
# Anthropic's @anthropic-ai/sdk, LangChain JS, the AI SDK, lm-evaluation-harness's request shapes and
# Python's urllib (the /v1 routes, and /sdapi/v1 as Open WebUI calls it),
# over real stacks on free ports: bin/api with its
# embedded nats-server and bin/worker, one serving variant B's tiny model
# (the text routes), one variant C's tiny SD3 export (the image route), and a
# third, variant B with one slot whose answers run to 8000 tokens (about four
# seconds on one CPU thread), for the test that aborts a stream, and a
# fourth, variant B with answers of up to 512 tokens, for structured output
# and tools; and a fifth, whose catalogue holds the tiny BERT as
# genq-embedding beside variant B's model, with a worker serving it, for
# /v1/embeddings, which embeddings.test.mjs holds to llama-server
# --embedding on the same file ($LLAMA_SERVER).
# make test-openai builds bin/ and runs it; make test does not (it needs
# Node).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ ! -d test/openai/node_modules/openai || ! -d test/openai/node_modules/ai || ! -d test/openai/node_modules/@anthropic-ai/sdk ||
	! -d test/openai/node_modules/@langchain/anthropic || ! -d test/openai/node_modules/@ai-sdk/anthropic || ! -d test/openai/node_modules/ajv ]]; then
	(cd test/openai && npm install --no-audit --no-fund)
fi

work=$(mktemp -d)
pids=()
cleanup() {
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null && wait "${pids[i]}" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

# Ten ports at once, apart from each other and from clients' (test/free-ports.py).
ports=$(test/free-ports.py 10)
read -r -d '' port nats_port port_c nats_port_c port_1 nats_port_1 port_s nats_port_s port_e nats_port_e <<<"$ports" || true
key="sk-genq-test-$RANDOM"
# Keys of tenants limited to 10 requests a minute (limits.test.mjs), one
# per SDK, beside the unlimited one.
key_openai="sk-genq-limited-openai-$RANDOM"
key_anthropic="sk-genq-limited-anthropic-$RANDOM"
printf '%s tenant=sdk-openai rpm=10\n%s tenant=sdk-anthropic rpm=10\n' "$key_openai" "$key_anthropic" >"$work/keys"

bin/genqctl models tiny --variant B --dir "$work/model" >"$work/models.log" 2>&1
# The image tests run on the default engine, ggml, whose tiny model
# carries both engines' files; IMAGE_ENGINE=onnx runs them on ONNX Runtime.
image_engine="${IMAGE_ENGINE:-ggml}"
bin/genqctl models tiny --variant C --engine "$image_engine" --dir "$work/model-c" >>"$work/models.log" 2>&1
bin/genqctl models tiny --family bert --dir "$work/model-e" >>"$work/models.log" 2>&1
VARIANT=B PORT="$port" NATS_URL="" EMBEDDED_NATS_PORT="$nats_port" EMBEDDED_NATS_STORE="$work/nats" \
	METRICS_ADDR=127.0.0.1:0 API_KEYS="$key" API_KEYS_FILE="$work/keys" GENERATE_TIMEOUT=60s QUEUE_CAPACITY=32 LOG_LEVEL=info bin/api >"$work/api.log" 2>&1 &
pids+=($!)
VARIANT=B MODEL_DIR="$work/model" NATS_URL="nats://127.0.0.1:$nats_port" METRICS_ADDR=127.0.0.1:0 \
	SLOTS=2 TEXT_THREADS=1 TEXT_MAX_NEW_TOKENS=16 LOG_LEVEL=warn bin/worker >"$work/worker.log" 2>&1 &
pids+=($!)
# Variant C: 64×64 images in 2 steps by default, so each takes milliseconds.
VARIANT=C PORT="$port_c" NATS_URL="" EMBEDDED_NATS_PORT="$nats_port_c" EMBEDDED_NATS_STORE="$work/nats-c" \
	METRICS_ADDR=127.0.0.1:0 API_KEYS="$key" GENERATE_TIMEOUT=60s LOG_LEVEL=warn \
	bin/api >"$work/api-c.log" 2>&1 &
pids+=($!)
VARIANT=C MODEL_DIR="$work/model-c" NATS_URL="nats://127.0.0.1:$nats_port_c" METRICS_ADDR=127.0.0.1:0 \
	IMAGE_ENGINE="$image_engine" SLOTS=2 IMAGE_DEVICE=cpu IMAGE_THREADS=1 IMAGE_WIDTH=64 IMAGE_HEIGHT=64 IMAGE_STEPS=2 IMAGE_MAX_SIZE=128 IMAGE_MAX_STEPS=4 \
	ONNXRUNTIME_LIB="${ONNXRUNTIME_LIB:-$PWD/lib/onnxruntime/libonnxruntime.so.1}" LOG_LEVEL=warn bin/worker >"$work/worker-c.log" 2>&1 &
pids+=($!)
# One slot, and answers of 8000 tokens that ignore end-of-turn: a job holds
# the slot for seconds unless a caller that went away stops it. The model
# was trained for 8192 tokens of context.
VARIANT=B PORT="$port_1" NATS_URL="" EMBEDDED_NATS_PORT="$nats_port_1" EMBEDDED_NATS_STORE="$work/nats-1" \
	METRICS_ADDR=127.0.0.1:0 API_KEYS="$key" GENERATE_TIMEOUT=60s LOG_LEVEL=warn bin/api >"$work/api-1.log" 2>&1 &
pids+=($!)
VARIANT=B MODEL_DIR="$work/model" NATS_URL="nats://127.0.0.1:$nats_port_1" METRICS_ADDR=127.0.0.1:0 \
	SLOTS=1 TEXT_THREADS=1 TEXT_IGNORE_EOS=true TEXT_MAX_NEW_TOKENS=8000 TEXT_CONTEXT_SIZE=8192 LOG_LEVEL=warn \
	bin/worker >"$work/worker-1.log" 2>&1 &
pids+=($!)

# Structured output and tools: answers of up to 512 tokens, so that a
# constrained answer of the random model ends inside the limit (a call's
# longest under its grammar, bounded whitespace and \u escapes included,
# is about 400 bytes, a token each in the tiny vocabulary), and a
# context of 2048, since tools' definitions are rendered into the prompt
# (the tiny model's vocabulary is byte-level: a token per byte).
VARIANT=B PORT="$port_s" NATS_URL="" EMBEDDED_NATS_PORT="$nats_port_s" EMBEDDED_NATS_STORE="$work/nats-s" \
	METRICS_ADDR=127.0.0.1:0 API_KEYS="$key" GENERATE_TIMEOUT=120s LOG_LEVEL=warn bin/api >"$work/api-s.log" 2>&1 &
pids+=($!)
VARIANT=B MODEL_DIR="$work/model" NATS_URL="nats://127.0.0.1:$nats_port_s" METRICS_ADDR=127.0.0.1:0 \
	SLOTS=4 TEXT_THREADS=1 TEXT_MAX_NEW_TOKENS=512 TEXT_CONTEXT_SIZE=2048 LOG_LEVEL=warn bin/worker >"$work/worker-s.log" 2>&1 &
pids+=($!)
# Embeddings: the catalogue's embedding model, its worker loading it on
# the first request.
embedding_model="genq-embedding=$work/model-e/tiny-bert.gguf"
VARIANT=B PORT="$port_e" NATS_URL="" EMBEDDED_NATS_PORT="$nats_port_e" EMBEDDED_NATS_STORE="$work/nats-e" \
	METRICS_ADDR=127.0.0.1:0 API_KEYS="$key" GENERATE_TIMEOUT=60s MODELS="$embedding_model" LOG_LEVEL=warn bin/api >"$work/api-e.log" 2>&1 &
pids+=($!)
MODELS="$embedding_model" WORKER_MODELS=genq-embedding NATS_URL="nats://127.0.0.1:$nats_port_e" METRICS_ADDR=127.0.0.1:0 \
	EMBEDDING_THREADS=1 LOG_LEVEL=warn bin/worker >"$work/worker-e.log" 2>&1 &
pids+=($!)

# Ready once each api sees its worker's heartbeat.
for p in "$port" "$port_c" "$port_1" "$port_s"; do
	ready=""
	for _ in $(seq 1 120); do
		if curl -sf "http://127.0.0.1:$p/" 2>/dev/null | grep -q '"live_workers":[1-9]'; then
			ready=1
			break
		fi
		sleep 0.5
	done
	if [[ -z "$ready" ]]; then
		echo "the stack on port $p did not come up; the logs:" >&2
		tail -n 30 "$work"/api*.log "$work"/worker*.log >&2
		exit 1
	fi
done

export GENQ_OPENAI_URL="http://127.0.0.1:$port/v1" GENQ_OPENAI_IMAGE_URL="http://127.0.0.1:$port_c/v1" \
	GENQ_OPENAI_ONE_SLOT_URL="http://127.0.0.1:$port_1/v1" GENQ_OPENAI_STRUCTURED_URL="http://127.0.0.1:$port_s/v1" GENQ_API_KEY="$key" \
	GENQ_LIMITED_OPENAI_KEY="$key_openai" GENQ_LIMITED_ANTHROPIC_KEY="$key_anthropic" \
	GENQ_OPENAI_EMBEDDINGS_URL="http://127.0.0.1:$port_e/v1" GENQ_EMBEDDING_MODEL="$work/model-e/tiny-bert.gguf" LLAMA_SERVER="${LLAMA_SERVER:-$PWD/lib/llama-bin/llama-server}"
status=0
# OPENAI_TESTS picks some of the files (OPENAI_TESTS=limits.test.mjs); the
# Python clients run with all of them.
tests=${OPENAI_TESTS:-"openai.test.mjs harness.test.mjs responses.test.mjs images.test.mjs abort.test.mjs structured.test.mjs anthropic.test.mjs batches.test.mjs limits.test.mjs embeddings.test.mjs"}
# shellcheck disable=SC2086 # a list of files
(cd test/openai && node --test $tests) || status=$?
if [[ -z "${OPENAI_TESTS:-}" ]]; then
	python3 test/openai/smoke_urllib.py || status=$?
	python3 test/openai/sdapi_urllib.py || status=$?
fi
# No key may show in what the apis wrote, the main one logging at info
# (its tenants' refusals among it).
for k in "$key" "$key_openai" "$key_anthropic"; do
	if grep -qF -- "$k" "$work"/api*.log; then
		echo "an API key shows in the api's log" >&2
		status=1
	fi
done
if ! grep -q '"tenant":"sdk-openai"\|tenant=sdk-openai' "$work/api.log" && [[ "$tests" == *limits.test.mjs* ]]; then
	echo "the api's log names no limited tenant: the key check above saw no refusal" >&2
	status=1
fi
if ((status != 0)); then
	tail -n 30 "$work"/api*.log "$work"/worker*.log >&2
fi
exit $status
