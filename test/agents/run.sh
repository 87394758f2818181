#!/usr/bin/env bash
# run.sh: Claude Code, from npm (@anthropic-ai/claude-code, pinned in
# package.json), against make run's stack at its defaults, through a
# recording proxy (proxy.py), in two conversations: a plain one-shot task,
# and one through a tool call and its result. `claude -p …
# --output-format json` must exit 0 with is_error false, every request it
# made must be answered 2xx, and the tool call's arguments must be valid
# under the tool's schema (check.py, which run-openai.sh shares).
# The requests are summed up in $AGENTS_REPORTS (default results/agents),
# a file per conversation, and on stdout.
#
# No network but the stack: telemetry, error reports, updates and every
# other call Claude Code makes on its own are turned off, and HOME is a
# fresh folder, so nothing of the machine's own Claude Code setup is read.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ ! -d test/agents/node_modules/@anthropic-ai/claude-code || ! -d test/agents/node_modules/ajv ]]; then
	npm ci --prefix test/agents --no-audit --no-fund --silent
fi
# npm runs no install script of a dependency unless allowed; the package's
# own postinstall only copies the platform package's binary into place, so
# the binary is taken from there.
case "$(uname -m)" in
x86_64) platform=linux-x64 ;;
aarch64) platform=linux-arm64 ;;
*) echo "test-agents: no Claude Code binary for $(uname -m)" >&2; exit 1 ;;
esac
claude="$PWD/test/agents/node_modules/@anthropic-ai/claude-code-$platform/claude"
[[ -x $claude ]] || { echo "test-agents: $claude is missing: npm ci --prefix test/agents" >&2; exit 1; }

source test/agents/stack.sh
start_stack

mkdir -p "$work/project"
printf 'hello\n' >"$work/project/README.md"
printf 'package main\n\nfunc main() {}\n' >"$work/project/main.go"

# converse NAME PROMPT [TOOL]: one `claude -p` conversation through its own
# recording proxy into $reports/NAME.jsonl, with a fresh HOME; with TOOL,
# the proxy makes the first request name that tool in tool_choice
# (proxy.py says why). Writes Claude Code's JSON output to $work/NAME.json.
converse() {
	local name=$1 prompt=$2 tool=${3:-} proxy_port rc start
	proxy_port=$(free_port)
	: >"$reports/$name.jsonl"
	python3 test/agents/proxy.py "$proxy_port" "http://127.0.0.1:$port" "$reports/$name.jsonl" $tool &
	pids+=($!)
	for _ in $(seq 50); do python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$proxy_port" 2>/dev/null && break; sleep 0.1; done
	mkdir -p "$work/home-$name"
	local agent_env=(
		HOME="$work/home-$name" ANTHROPIC_BASE_URL="http://127.0.0.1:$proxy_port" ANTHROPIC_API_KEY=sk-genq-test
		DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
		DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1
	)
	start=$SECONDS
	set +e
	(cd "$work/project" && env "${agent_env[@]}" timeout 1500 "$claude" -p "$prompt" --output-format json) \
		>"$work/$name.json" 2>"$work/$name.err" </dev/null
	rc=$?
	set -e
	echo "test-agents: $name: claude -p exited $rc after $((SECONDS - start)) s"
	if ((rc != 0)); then
		echo "test-agents: FAIL: $name: claude exited $rc" >&2
		tail -n 20 "$work/$name.err" >&2
		return 1
	fi
}

passed=0 failed=0
# check OUTPUT REQUESTS [tool]: judges a conversation, counting it.
check() {
	if python3 test/agents/check.py claude "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
# A plain one-shot task, as a newcomer types it.
if converse plain "list the files here"; then check "$work/plain.json" "$reports/plain.jsonl"; else failed=$((failed + 1)); fi
# A conversation through a tool call and its result: Read, a read-only
# tool Claude Code runs without asking, so -p's permissions allow it.
if converse tool "show me main.go" Read; then check "$work/tool.json" "$reports/tool.jsonl" tool; else failed=$((failed + 1)); fi

if ((failed)); then
	echo "--- stack log (last 60 lines)" >&2
	tail -n 60 "$work/stack.log" >&2
fi
echo "$failed failed, $passed passed"
((failed == 0))
