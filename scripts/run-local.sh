#!/usr/bin/env bash
# run-local.sh: the whole genq stack on this machine, in the foreground.
# The api starts an embedded nats-server; one worker serves $VARIANT.
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

VARIANT="${VARIANT:-B}"
PORT="${PORT:-8080}"
model_dir="${MODEL_DIR:-models/$VARIANT}"
nats_port="${EMBEDDED_NATS_PORT:-4222}"

if [[ -z "$(find "$model_dir" -mindepth 1 -maxdepth 1 ! -name README.md 2>/dev/null | head -n 1)" ]]; then
	cat >&2 <<MSG
################################################################################
# $model_dir is empty: writing a TINY model with RANDOM weights.
# Its output is NOISE: it proves the plumbing, not the model.
# For the real model: bin/genqctl download --variant $VARIANT
################################################################################
MSG
	bin/genqctl models tiny --variant "$VARIANT" --dir "$model_dir"
fi

pids=()
stop() {
	trap - INT TERM EXIT
	# The worker drains first, then the api (and its embedded NATS) stops.
	[[ ${#pids[@]} -gt 1 ]] && kill -TERM "${pids[1]}" 2>/dev/null && wait "${pids[1]}" 2>/dev/null || true
	kill -TERM "${pids[0]}" 2>/dev/null && wait "${pids[0]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

VARIANT="$VARIANT" PORT="$PORT" EMBEDDED_NATS_PORT="$nats_port" NATS_URL="" METRICS_ADDR="${API_METRICS_ADDR:-127.0.0.1:9090}" bin/api &
pids+=($!)
VARIANT="$VARIANT" MODEL_DIR="$model_dir" NATS_URL="nats://127.0.0.1:$nats_port" METRICS_ADDR="${METRICS_ADDR:-127.0.0.1:9091}" bin/worker &
pids+=($!)
echo "genq variant $VARIANT: http://localhost:$PORT  (Ctrl-C stops)" >&2
# Whichever exits first ends the stack.
wait -n "${pids[@]}"
