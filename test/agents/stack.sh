# stack.sh: what run.sh and run-openai.sh share, sourced by both from the
# repository's root: a scratch folder ($work) and the processes to stop
# with it ($pids), free ports, where the requests and the agents' tools
# are recorded ($reports), and make run's stack at its defaults
# (start_stack).

work=$(mktemp -d)
pids=()
cleanup() {
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null && wait "${pids[i]}" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { test/free-ports.py; } # apart from clients' ports

reports="${AGENTS_REPORTS:-results/agents}"
mkdir -p "$reports"
# The tools the agents offer, as they sent them (proxy.py), for
# BenchmarkSchemas: GENQ_AGENT_TOOLS=results/agents/tools-run.jsonl:…
export PROXY_TOOLS_LOG="$PWD/$reports/tools-$(basename "$0" .sh).jsonl"
: >"$PROXY_TOOLS_LOG"

# start_stack: make run, as a newcomer starts it: its defaults, a tiny
# model written into an empty model folder; its api's port in $port once
# it is ready.
start_stack() {
	port=$(free_port)
	PORT="$port" EMBEDDED_NATS_PORT="$(free_port)" API_METRICS_ADDR="127.0.0.1:$(free_port)" METRICS_ADDR="127.0.0.1:$(free_port)" \
		EMBEDDING_METRICS_ADDR="127.0.0.1:$(free_port)" MODEL_DIR="$work/models" scripts/run-local.sh >"$work/stack.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 600); do
		curl -fsS "http://127.0.0.1:$port/readiness" >/dev/null 2>&1 && break
		kill -0 "${pids[0]}" 2>/dev/null || break
		sleep 1
	done
	curl -fsS "http://127.0.0.1:$port/readiness" >/dev/null || {
		tail -n 40 "$work/stack.log" >&2
		echo "test-agents: the stack never became ready" >&2
		exit 1
	}
}
