#!/usr/bin/env bash
# run.sh: Claude Code, from npm (@anthropic-ai/claude-code, pinned in
# package.json), against make run's stack at its defaults, through a
# recording proxy (proxy.py): `claude -p … --output-format json` must exit
# 0 with is_error false, and every request it made must be answered 2xx.
# The requests' sizes are written to $AGENTS_REPORT (default
# results/agents/requests.jsonl) and summed up on stdout.
#
# No network but the stack: telemetry, error reports, updates and every
# other call Claude Code makes on its own are turned off, and HOME is a
# fresh folder, so nothing of the machine's own Claude Code setup is read.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ ! -d test/agents/node_modules/@anthropic-ai/claude-code ]]; then
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
port=$(free_port)
proxy_port=$(free_port)
report="${AGENTS_REPORT:-results/agents/requests.jsonl}"
mkdir -p "$(dirname "$report")"
: >"$report"

# make run, as a newcomer starts it: its defaults, a tiny model written
# into an empty model folder.
PORT="$port" EMBEDDED_NATS_PORT="$(free_port)" API_METRICS_ADDR="127.0.0.1:$(free_port)" METRICS_ADDR="127.0.0.1:$(free_port)" \
	MODEL_DIR="$work/models" scripts/run-local.sh >"$work/stack.log" 2>&1 &
pids+=($!)
python3 test/agents/proxy.py "$proxy_port" "http://127.0.0.1:$port" "$report" &
pids+=($!)
for _ in $(seq 600); do
	curl -fsS "http://127.0.0.1:$port/readiness" >/dev/null 2>&1 && break
	kill -0 "${pids[0]}" 2>/dev/null || break
	sleep 1
done
curl -fsS "http://127.0.0.1:$port/readiness" >/dev/null || { tail -n 40 "$work/stack.log" >&2; echo "test-agents: the stack never became ready" >&2; exit 1; }

mkdir -p "$work/home" "$work/project"
printf 'hello\n' >"$work/project/README.md"
printf 'package main\n\nfunc main() {}\n' >"$work/project/main.go"
agent_env=(
	HOME="$work/home" ANTHROPIC_BASE_URL="http://127.0.0.1:$proxy_port" ANTHROPIC_API_KEY=sk-genq-test
	DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
	DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1
)
start=$SECONDS
set +e
(cd "$work/project" && env "${agent_env[@]}" timeout 1500 "$claude" -p "list the files here" --output-format json) \
	>"$work/claude.json" 2>"$work/claude.err" </dev/null
rc=$?
set -e
echo "test-agents: claude -p exited $rc after $((SECONDS - start)) s"
fail=0
if ((rc != 0)); then
	echo "test-agents: FAIL: claude exited $rc" >&2
	tail -n 20 "$work/claude.err" >&2
	fail=1
fi
python3 - "$work/claude.json" "$report" <<'PY' || fail=1
import json, sys
out, report = sys.argv[1], sys.argv[2]
ok = True
try:
    res = json.load(open(out))
except ValueError as e:
    print("test-agents: FAIL: claude's output is not JSON:", e, open(out).read()[:2000], file=sys.stderr)
    sys.exit(1)
if res.get("is_error") is not False:
    print("test-agents: FAIL: is_error is", res.get("is_error"), json.dumps(res)[:2000], file=sys.stderr)
    ok = False
reqs = [json.loads(l) for l in open(report) if l.strip()]
if not reqs:
    print("test-agents: FAIL: claude made no request", file=sys.stderr)
    ok = False
bad = [r for r in reqs if not 200 <= r["status"] < 300]
for r in bad:
    print("test-agents: FAIL: %s %s answered %d" % (r["method"], r["path"], r["status"]), file=sys.stderr)
ok = ok and not bad
msgs = [r for r in reqs if r["path"].startswith("/v1/messages")]
for r in msgs:
    print("test-agents: %-28s %3d %7d bytes, %2d tools (%6d bytes), %2d messages, max_tokens %s, thinking %s" % (
        r["path"], r["status"], r["bytes"], r.get("tools", 0), r.get("tools_bytes", 0), r.get("messages", 0), r.get("max_tokens"), r.get("thinking")))
if not any(r.get("thinking") not in (None, "disabled") for r in msgs):
    print("test-agents: note: no request asked for thinking", file=sys.stderr)
print("test-agents: %d requests, %d to /v1/messages, largest %d bytes; num_turns %s" % (
    len(reqs), len(msgs), max([r["bytes"] for r in reqs] or [0]), res.get("num_turns")))
sys.exit(0 if ok else 1)
PY
if ((fail)); then
	echo "--- stack log (last 60 lines)" >&2
	tail -n 60 "$work/stack.log" >&2
	echo "1 failed, 0 passed"
	exit 1
fi
echo "1 passed, 0 failed"
