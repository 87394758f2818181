#!/usr/bin/env bash
# run.sh: genq's web UI (/ui/) in a real browser: Debian's chromium, driven
# headless by puppeteer-core (which downloads no browser of its own),
# against make run on free ports, with the tiny model it writes: variant B
# for the chat and the queue view, variant C for images, and variant B
# behind API_KEYS for the key prompt. The test writes screenshots of the
# three views into docs/.
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
groups=()
cleanup() {
	# SIGTERM to each make run's session (a background job ignores
	# SIGINT): make run stops its worker, then its api, which run in
	# process groups of their own but in its session. Whatever is left
	# after 20 s is killed.
	for g in "${groups[@]}"; do pkill -TERM -s "$g" 2>/dev/null || true; done
	for g in "${groups[@]}"; do
		for _ in $(seq 1 100); do pgrep -s "$g" >/dev/null || break; sleep 0.2; done
		pkill -KILL -s "$g" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { test/free-ports.py; } # apart from clients' ports
port_b=$(free_port) nats_b=$(free_port) port_c=$(free_port) nats_c=$(free_port) port_k=$(free_port) nats_k=$(free_port)

# Each stack is make run, on ports of its own and model folders of its
# own (make run writes the tiny models there: the chat or image model and
# the embedding model), in a process group of its own, so that cleanup can
# stop it whole.
run() { # name, then settings
	local name=$1
	shift
	setsid env "$@" API_METRICS_ADDR="127.0.0.1:$(free_port)" METRICS_ADDR="127.0.0.1:$(free_port)" \
		EMBEDDING_MODEL_DIR="$work/embedding-$name" EMBEDDING_METRICS_ADDR="127.0.0.1:$(free_port)" \
		HEARTBEAT_INTERVAL=1s HEARTBEAT_TTL=3s LOG_LEVEL=warn \
		make --no-print-directory run >"$work/$name.log" 2>&1 &
	groups+=($!)
}
# Two slots, answers of up to 30,000 tokens that ignore end-of-turn (some
# fifteen seconds: a stop has something to stop).
text=(SLOTS=2 TEXT_THREADS=1 TEXT_MAX_NEW_TOKENS=30000 TEXT_CONTEXT_SIZE=32768 TEXT_IGNORE_EOS=true GENERATE_TIMEOUT=120s)
run text VARIANT=B MODEL_DIR="$work/model-b" PORT="$port_b" EMBEDDED_NATS_PORT="$nats_b" EMBEDDED_NATS_STORE="$work/nats-b" \
	WORKER_ID=ui-worker-1 "${text[@]}"
run image VARIANT=C MODEL_DIR="$work/model-c" PORT="$port_c" EMBEDDED_NATS_PORT="$nats_c" EMBEDDED_NATS_STORE="$work/nats-c" \
	SLOTS=1 IMAGE_DEVICE=cpu IMAGE_THREADS=1 IMAGE_MAX_SIZE=256 IMAGE_MAX_STEPS=8 GENERATE_TIMEOUT=120s
key="sk-ui-test-$RANDOM"
run keyed VARIANT=B MODEL_DIR="$work/model-k" PORT="$port_k" EMBEDDED_NATS_PORT="$nats_k" EMBEDDED_NATS_STORE="$work/nats-k" \
	API_KEYS="$key" "${text[@]}"

for p in "$port_b" "$port_c" "$port_k"; do
	ready=""
	for _ in $(seq 1 240); do
		if curl -s "http://127.0.0.1:$p/" 2>/dev/null | grep -q '"live_workers":[1-9]'; then
			ready=1
			break
		fi
		sleep 0.5
	done
	if [[ -z "$ready" ]]; then
		echo "the stack on port $p did not come up; the logs:" >&2
		tail -n 30 "$work"/*.log >&2
		exit 1
	fi
done

export GENQ_CHROMIUM="$chrome" GENQ_UI_TEXT="http://127.0.0.1:$port_b" GENQ_UI_IMAGE="http://127.0.0.1:$port_c" \
	GENQ_UI_KEYED="http://127.0.0.1:$port_k" GENQ_UI_KEY="$key" \
	GENQ_UI_SECOND_WORKER="$(printf '%s\n' VARIANT=B MODEL_DIR="$work/model-b" NATS_URL="nats://127.0.0.1:$nats_b" METRICS_ADDR="127.0.0.1:$(free_port)" \
		HEARTBEAT_INTERVAL=1s HEARTBEAT_TTL=3s LOG_LEVEL=warn WORKER_ID=ui-worker-2 "${text[@]}" | paste -sd' ')" \
	GENQ_UI_SHOTS="$PWD/docs"
status=0
# GENQ_UI_TEST runs only the tests whose names match it.
(cd test/ui && node --test ${GENQ_UI_TEST:+--test-name-pattern="$GENQ_UI_TEST"} ui.test.mjs) || status=$?
if ((status != 0)); then
	tail -n 30 "$work"/*.log >&2
fi
exit $status
