#!/usr/bin/env bash
# run.sh: genq's web UI (/ui/) in a real browser: Debian's chromium, driven
# headless by puppeteer-core (which downloads no browser of its own), over
# real stacks on free ports, each bin/api with its embedded nats-server
# and bin/worker on a tiny model: variant B for the chat and the queue
# view, variant C for images, and variant B behind API_KEYS for the key
# prompt. The test writes screenshots of the three views into docs/.
# make test-ui builds bin/ and runs it; .ci/run runs it too.
set -euo pipefail
cd "$(dirname "$0")/../.."

chrome="${GENQ_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [[ -z "$chrome" ]]; then
	echo "test-ui: no chromium (apt-get install chromium, or set GENQ_CHROMIUM)" >&2
	exit 1
fi
if [[ ! -d test/ui/node_modules/puppeteer-core ]]; then
	(cd test/ui && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund)
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

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port_b=$(free_port) nats_b=$(free_port) port_c=$(free_port) nats_c=$(free_port) port_k=$(free_port) nats_k=$(free_port)

bin/genqctl models tiny --variant B --dir "$work/model" >"$work/models.log" 2>&1
bin/genqctl models tiny --variant C --dir "$work/model-c" >>"$work/models.log" 2>&1
common=(METRICS_ADDR=127.0.0.1:0 LOG_LEVEL=warn HEARTBEAT_INTERVAL=1s HEARTBEAT_TTL=3s)
env "${common[@]}" VARIANT=B PORT="$port_b" NATS_URL="" EMBEDDED_NATS_PORT="$nats_b" EMBEDDED_NATS_STORE="$work/nats-b" \
	GENERATE_TIMEOUT=120s bin/api >"$work/api-b.log" 2>&1 &
pids+=($!)
# Two slots, answers of up to 8,000 tokens (some four seconds) that ignore end-of-turn (a stop
# has something to stop), a context for them.
worker_b=(VARIANT=B MODEL_DIR="$work/model" NATS_URL="nats://127.0.0.1:$nats_b" SLOTS=2 TEXT_THREADS=1
	TEXT_MAX_NEW_TOKENS=8000 TEXT_CONTEXT_SIZE=8192 TEXT_IGNORE_EOS=true)
env "${common[@]}" "${worker_b[@]}" WORKER_ID=ui-worker-1 bin/worker >"$work/worker-b.log" 2>&1 &
pids+=($!)
env "${common[@]}" VARIANT=C PORT="$port_c" NATS_URL="" EMBEDDED_NATS_PORT="$nats_c" EMBEDDED_NATS_STORE="$work/nats-c" \
	GENERATE_TIMEOUT=120s IMAGE_MAX_SIZE=256 IMAGE_MAX_STEPS=8 bin/api >"$work/api-c.log" 2>&1 &
pids+=($!)
env "${common[@]}" VARIANT=C MODEL_DIR="$work/model-c" NATS_URL="nats://127.0.0.1:$nats_c" SLOTS=1 IMAGE_DEVICE=cpu IMAGE_THREADS=1 \
	IMAGE_MAX_SIZE=256 IMAGE_MAX_STEPS=8 ONNXRUNTIME_LIB="${ONNXRUNTIME_LIB:-$PWD/lib/onnxruntime/libonnxruntime.so.1}" \
	bin/worker >"$work/worker-c.log" 2>&1 &
pids+=($!)
env "${common[@]}" VARIANT=B PORT="$port_k" NATS_URL="" EMBEDDED_NATS_PORT="$nats_k" EMBEDDED_NATS_STORE="$work/nats-k" \
	API_KEYS="sk-ui-test-$RANDOM" bin/api >"$work/api-k.log" 2>&1 &
pids+=($!)

for p in "$port_b" "$port_c"; do
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

export GENQ_CHROMIUM="$chrome" GENQ_UI_TEXT="http://127.0.0.1:$port_b" GENQ_UI_IMAGE="http://127.0.0.1:$port_c" \
	GENQ_UI_KEYED="http://127.0.0.1:$port_k" GENQ_UI_SECOND_WORKER="$(printf '%s\n' "${common[@]}" "${worker_b[@]}" WORKER_ID=ui-worker-2 | paste -sd' ')" \
	GENQ_UI_SHOTS="$PWD/docs"
status=0
(cd test/ui && node --test ui.test.mjs) || status=$?
if ((status != 0)); then
	tail -n 30 "$work"/api*.log "$work"/worker*.log >&2
fi
exit $status
