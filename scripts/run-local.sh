#!/usr/bin/env bash
# run-local.sh: the whole genq stack on this machine, in the foreground.
# The api starts an embedded nats-server; one worker serves $VARIANT and
# another the embedding model in EMBEDDING_MODEL_DIR (models/embedding;
# empty: none), which the api's catalogue names genq-embedding. Ctrl-C stops
# everything, the workers first. Each port moves with its variable: PORT,
# EMBEDDED_NATS_PORT, API_METRICS_ADDR (the api's metrics), METRICS_ADDR
# (the worker's) and EMBEDDING_METRICS_ADDR (the embedding worker's).
set -euo pipefail
# The api and the worker stay in this script's process group (no job
# control), so a signal to make run's group, SIGKILL included, ends them
# with it and leaves no port held. Started in the background of a script
# they inherit SIGINT ignored, and keep it so (cmd/api, cmd/worker): Ctrl-C
# reaches this script's trap alone, and stop() ends the worker before the
# api, since a worker whose NATS went first would warn at every pull.
cd "$(dirname "$0")/.."

VARIANT="${VARIANT:-B}"
PORT="${PORT:-8080}"
model_dir="${MODEL_DIR:-models/$VARIANT}"
nats_port="${EMBEDDED_NATS_PORT:-4222}"
api_metrics="${API_METRICS_ADDR-127.0.0.1:9090}"
worker_metrics="${METRICS_ADDR-127.0.0.1:9091}"
embedding_dir="${EMBEDDING_MODEL_DIR-models/embedding}"
embedding_metrics="${EMBEDDING_METRICS_ADDR-127.0.0.1:9092}"
[[ -z "$embedding_dir" ]] && embedding_metrics=""

# taken reports whether something listens on address (host:port, or
# :port for every interface).
taken() {
	local host=${1%:*} port=${1##*:}
	(exec 3<>"/dev/tcp/${host:-127.0.0.1}/$port") 2>/dev/null
}
busy=()
for pair in "PORT=:$PORT" "EMBEDDED_NATS_PORT=:$nats_port" "API_METRICS_ADDR=$api_metrics" "METRICS_ADDR=$worker_metrics" "EMBEDDING_METRICS_ADDR=$embedding_metrics"; do
	name=${pair%%=*} addr=${pair#*=}
	if [[ -n "$addr" ]] && taken "$addr"; then
		busy+=("$name ($addr is taken)")
	fi
done
if ((${#busy[@]} > 0)); then
	list=$(printf '%s, ' "${busy[@]}")
	echo "make run: ports in use; move them with ${list%, }: for example make run PORT=8081 EMBEDDED_NATS_PORT=4223 API_METRICS_ADDR=127.0.0.1:9190 METRICS_ADDR=127.0.0.1:9191 EMBEDDING_METRICS_ADDR=127.0.0.1:9192 (an empty metrics address turns /metrics off)" >&2
	exit 1
fi

if [[ -z "$(find "$model_dir" -mindepth 1 -maxdepth 1 ! -name README.md 2>/dev/null | head -n 1)" ]]; then
	cat >&2 <<MSG
################################################################################
# $model_dir is empty: writing a TINY model with RANDOM weights.
# Its output is NOISE: it proves the plumbing, not the model.
# For the real model: bin/genqctl download --variant $VARIANT
################################################################################
MSG
	tiny=(--variant "$VARIANT" --dir "$model_dir")
	# The ggml image engine, the default, reads GGUF files the ONNX export
	# lacks: for it this writes both, from the same weights; for
	# IMAGE_ENGINE=onnx the ONNX export alone.
	[[ "$VARIANT" == C ]] && tiny+=(--engine "${IMAGE_ENGINE:-ggml}")
	bin/genqctl models tiny "${tiny[@]}"
fi
# The embedding model joins the api's catalogue as genq-embedding (and
# under OpenAI's embedding models' names), beside the variant's model,
# which keeps every other name, as without a catalogue.
api_models=() embedding_models=()
if [[ -n "$embedding_dir" ]]; then
	if [[ -z "$(find "$embedding_dir" -maxdepth 1 -name '*.gguf' 2>/dev/null | head -n 1)" ]]; then
		echo "make run: $embedding_dir has no embedding model: writing a TINY one with RANDOM weights (its vectors are noise)" >&2
		bin/genqctl models tiny --family bert --dir "$embedding_dir"
	fi
	embedding_file=$(find "$embedding_dir" -maxdepth 1 -name '*.gguf' | sort | head -n 1)
	embedding_models=(MODELS="genq-embedding=$embedding_file" WORKER_MODELS=genq-embedding)
	api_models=(MODELS="genq-embedding=$embedding_file"
		MODEL_ALIASES="*=genq-$VARIANT,text-embedding-3-small=genq-embedding,text-embedding-3-large=genq-embedding,text-embedding-ada-002=genq-embedding")
fi
if [[ "$VARIANT" == C && "${IMAGE_ENGINE:-ggml}" == ggml && ! -d "$model_dir/ggml" ]]; then
	echo "make run: IMAGE_ENGINE=ggml (the default) reads $model_dir/ggml/*.gguf, which $model_dir lacks: write a tiny model with both engines' files (bin/genqctl models tiny --variant C --dir $model_dir, after moving what is there), or run the ONNX engine (IMAGE_ENGINE=onnx)" >&2
	exit 1
fi

pids=()
stopping=
stop() {
	stopping=1
	trap - INT TERM EXIT
	# The workers drain first, then the api (and its embedded NATS) stops.
	local w
	for w in "${pids[@]:1}"; do
		kill -TERM "$w" 2>/dev/null || true
	done
	for w in "${pids[@]:1}"; do
		wait "$w" 2>/dev/null || true
	done
	kill -TERM "${pids[0]}" 2>/dev/null && wait "${pids[0]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

env "${api_models[@]}" VARIANT="$VARIANT" PORT="$PORT" EMBEDDED_NATS_PORT="$nats_port" NATS_URL="" METRICS_ADDR="$api_metrics" bin/api &
pids+=($!)
VARIANT="$VARIANT" MODEL_DIR="$model_dir" NATS_URL="nats://127.0.0.1:$nats_port" METRICS_ADDR="$worker_metrics" bin/worker &
pids+=($!)
if [[ -n "$embedding_dir" ]]; then
	env "${embedding_models[@]}" VARIANT="$VARIANT" WORKER_ID="$(hostname)-embedding" NATS_URL="nats://127.0.0.1:$nats_port" METRICS_ADDR="$embedding_metrics" bin/worker &
	pids+=($!)
fi
echo "genq variant $VARIANT: http://localhost:$PORT  (Ctrl-C stops)" >&2
# Whichever exits first ends the stack, and make run says which and why: a
# status above 128 is a signal (the worker's supervisor exits so when its
# worker process dies of one, having logged what it was running).
status=0 gone=
wait -n -p gone "${pids[@]}" || status=$?
# Ctrl-C or SIGTERM ran stop() meanwhile: nothing died on its own.
[[ -n "$stopping" || -z "$gone" ]] && exit "$status"
name=api
[[ "$gone" == "${pids[1]}" ]] && name=worker
[[ "$gone" == "${pids[2]:-}" ]] && name="embedding worker"
if ((status > 128)); then
	sig=$(kill -l $((status - 128)) 2>/dev/null || echo $((status - 128)))
	case $sig in
	ILL) why="illegal instruction" ;;
	SEGV) why="segmentation fault" ;;
	ABRT) why="aborted" ;;
	BUS) why="bus error" ;;
	FPE) why="floating-point exception" ;;
	KILL) why="killed: out of memory, or kill -9" ;;
	TERM) why="terminated" ;;
	*) why="signal $((status - 128))" ;;
	esac
	echo "make run: the $name (pid $gone) died of SIG$sig ($why); see its log above. Stopping the stack." >&2
else
	echo "make run: the $name (pid $gone) exited with status $status; see its log above. Stopping the stack." >&2
fi
exit "$status"
