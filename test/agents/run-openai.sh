#!/usr/bin/env bash
# run-openai.sh: coding agents that speak OpenAI's APIs against make run's
# stack at its defaults, each through its own recording proxy (proxy.py),
# each set up as its docs tell a user to (a base URL, a key, a model name;
# docs/agents.md):
#
#   codex     OpenAI's Codex CLI, `codex exec --json`: the Responses API
#             (from npm, pinned in package.json; the default)
#   opencode  `opencode run --format json`: chat completions (AI SDK)
#   qwen      Qwen Code, `qwen … --output-format json`: chat completions
#
# opencode and Qwen Code declare platform packages that npm's lock file
# cannot hold where the registry lacks them, so they are not in
# package.json: AGENTS=codex,opencode,qwen AGENTS_NODE_MODULES=DIR runs
# them from a node_modules folder installed by hand (npm install
# --ignore-scripts opencode-ai@1.18.33 @qwen-code/qwen-code@0.24.4).
#
# AGENTS lists conversations, AGENT or AGENT:TOOL (default: codex and
# codex:get_goal). With TOOL, the proxy names that tool in the first
# request's tool_choice (proxy.py says why), so the conversation goes
# through a call and its result; get_goal takes no arguments and changes
# nothing, so a random model's call to it is {} and harmless.
#
# Each must exit 0, end with a final answer its own JSON output holds and
# no error, and have every request it made answered 2xx; with TOOL, a
# later request must carry the call and its output back, the call's
# arguments valid under the tool's schema (validate.mjs, ajv). The
# requests' sizes are written to $AGENTS_REPORTS/NAME.jsonl (default
# results/agents; NAME is AGENT or AGENT-TOOL) and summed up on stdout.
#
# No network but the stack: updates, telemetry, model catalogues and
# sharing are turned off, and HOME is a fresh folder per agent.
set -euo pipefail
cd "$(dirname "$0")/../.."

nm=$PWD/test/agents/node_modules
extra=${AGENTS_NODE_MODULES:-$nm}
[[ -d $nm/@openai/codex ]] || npm ci --prefix test/agents --no-audit --no-fund --silent
# npm runs no install script of a dependency unless allowed: Codex's
# launcher finds its platform package itself; opencode's postinstall would
# only copy its platform package's binary into place, so it is taken from
# there (baseline: built for x86-64 CPUs without AVX2).
case "$(uname -m)" in
x86_64)
	opencode_pkg=opencode-linux-x64
	grep -qw avx2 /proc/cpuinfo || opencode_pkg=opencode-linux-x64-baseline
	;;
aarch64) opencode_pkg=opencode-linux-arm64 ;;
*) echo "test-agents: no agent binaries for $(uname -m)" >&2; exit 1 ;;
esac
codex=(node "$nm/@openai/codex/bin/codex.js")
opencode=("$extra/$opencode_pkg/bin/opencode")
qwen=(node "$extra/@qwen-code/qwen-code/cli-entry.js")
IFS=, read -ra convs <<<"${AGENTS:-codex,codex:get_goal}"
for conv in "${convs[@]}"; do
	case ${conv%%:*} in
	codex) ;;
	opencode) [[ -x ${opencode[0]} ]] || { echo "test-agents: ${opencode[0]} is missing (AGENTS_NODE_MODULES)" >&2; exit 2; } ;;
	qwen) [[ -f ${qwen[1]} ]] || { echo "test-agents: ${qwen[1]} is missing (AGENTS_NODE_MODULES)" >&2; exit 2; } ;;
	*) echo "test-agents: no agent ${conv%%:*} (codex, opencode, qwen)" >&2; exit 2 ;;
	esac
done

source test/agents/stack.sh
start_stack

# setup_agent NAME [TOOL]: a proxy of its own (naming TOOL in the first
# request's tool_choice), a fresh HOME and project (two files, a git
# repository as a user's project is: Codex asks for one).
setup_agent() {
	local name=$1 tool=${2:-}
	proxy_port=$(free_port)
	report="$reports/$name.jsonl"
	: >"$report"
	python3 test/agents/proxy.py "$proxy_port" "http://127.0.0.1:$port" "$report" $tool &
	pids+=($!)
	home="$work/$name/home" project="$work/$name/project"
	mkdir -p "$home" "$project"
	printf 'hello\n' >"$project/README.md"
	printf 'package main\n\nfunc main() {}\n' >"$project/main.go"
	git -C "$project" init -q
	for _ in $(seq 50); do
		(exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && return
		sleep 0.1
	done
}

# The configuration each agent's docs give for a self-hosted
# OpenAI-compatible server: nothing else.
config_codex() {
	mkdir -p "$home/.codex"
	cat >"$home/.codex/config.toml" <<TOML
model = "genq"
model_provider = "genq"
check_for_update_on_startup = false

[model_providers.genq]
name = "genq"
base_url = "http://127.0.0.1:$proxy_port/v1"
env_key = "GENQ_API_KEY"
wire_api = "responses"

[analytics]
enabled = false
TOML
	agent_env=(HOME="$home" GENQ_API_KEY=sk-genq-test)
	agent_cmd=("${codex[@]}" exec --json "list the files here")
}

config_opencode() {
	mkdir -p "$home/.config/opencode"
	cat >"$home/.config/opencode/opencode.json" <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "provider": {
    "genq": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "genq",
      "options": {"baseURL": "http://127.0.0.1:$proxy_port/v1", "apiKey": "{env:GENQ_API_KEY}"},
      "models": {"genq": {"name": "genq"}}
    }
  },
  "model": "genq/genq",
  "autoupdate": false,
  "share": "disabled"
}
JSON
	agent_env=(HOME="$home" GENQ_API_KEY=sk-genq-test OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1
		OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1)
	agent_cmd=("${opencode[@]}" run --format json "list the files here")
}

config_qwen() {
	mkdir -p "$home/.qwen"
	cat >"$home/.qwen/settings.json" <<JSON
{"telemetry": {"enabled": false}, "privacy": {"usageStatisticsEnabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}
JSON
	agent_env=(HOME="$home" OPENAI_BASE_URL="http://127.0.0.1:$proxy_port/v1" OPENAI_API_KEY=sk-genq-test OPENAI_MODEL=genq)
	agent_cmd=("${qwen[@]}" "list the files here" --output-format json)
}

passed=0 failed=0
for conv in "${convs[@]}"; do
	agent=${conv%%:*} tool=
	[[ $conv == *:* ]] && tool=${conv#*:}
	name=$agent${tool:+-$tool}
	setup_agent "$name" "$tool"
	"config_$agent"
	start=$SECONDS
	set +e
	(cd "$project" && env "${agent_env[@]}" timeout 1200 "${agent_cmd[@]}") >"$work/$name.out" 2>"$work/$name.err" </dev/null
	rc=$?
	set -e
	echo "test-agents: $name exited $rc after $((SECONDS - start)) s"
	ok=1
	if ((rc != 0)); then
		echo "test-agents: FAIL: $name exited $rc" >&2
		tail -n 20 "$work/$name.err" >&2
		ok=0
	fi
	python3 test/agents/check.py "$agent" "$work/$name.out" "$report" ${tool:+tool} || ok=0
	if ((ok)); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
if ((failed)); then
	echo "--- stack log (last 60 lines)" >&2
	tail -n 60 "$work/stack.log" >&2
fi
echo "$passed passed, $failed failed"
((failed == 0))
