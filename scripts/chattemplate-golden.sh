#!/usr/bin/env bash
# chattemplate-golden.sh
#
# Regenerates internal/chattemplate/testdata/golden: for every template in
# internal/chattemplate/testdata/templates, llama.cpp's own server
# (llama-server --jinja --chat-template-file T) renders every conversation
# of testdata/conversations.json (POST /apply-template), and the prompt it
# answers, or its error, is written to golden/T.json with the template's
# capabilities (GET /props) and the date the server rendered with (Llama
# 3.1's "Today Date" line and strftime_now read the clock). TestGolden
# renders the same conversations with genq's chattemplate and wants the
# same bytes. The server's enable_thinking (on where its analysis of the
# template finds a reasoning block) is recorded too, from its log.
#
# The model is only there for its vocabulary: its BOS and EOS texts and
# whether the tokenizer adds BOS. A tiny generated Llama 3 GGUF does
# (genqctl models tiny --variant B); MODEL names another.
#
# Needs: llama-server built from the pinned llama.cpp (LLAMA_SERVER, by
# default the one make engine links at lib/llama-bin), curl and jq.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/internal/chattemplate/testdata"
server="${LLAMA_SERVER:-$root/lib/llama-bin/llama-server}"
port="${PORT:-18432}"
for tool in curl jq; do
	command -v "$tool" >/dev/null || { echo "chattemplate-golden.sh: $tool is needed" >&2; exit 1; }
done
[[ -x "$server" ]] || { echo "chattemplate-golden.sh: no llama-server at $server (run make engine, or set LLAMA_SERVER)" >&2; exit 1; }

work="$(mktemp -d)"
pid=""
cleanup() {
	if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

model="${MODEL:-}"
if [[ -z "$model" ]]; then
	(cd "$root" && go run ./cmd/genqctl models tiny --variant B --dir "$work/model" >/dev/null)
	model="$(ls "$work"/model/*.gguf)"
fi

export LD_LIBRARY_PATH="$(dirname "$server")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$data/golden"
date_before="$(date +%F)"
n=0
for tmpl in "$data"/templates/*.jinja; do
	name="$(basename "$tmpl" .jinja)"
	out="$data/golden/$name.json"
	"$server" --jinja --chat-template-file "$tmpl" -m "$model" --port "$port" -t 1 -c 512 -np 1 --no-warmup -lv 4 \
		>"$work/server.log" 2>&1 &
	pid=$!
	up=""
	for _ in $(seq 1 100); do
		if curl -sf "localhost:$port/health" >/dev/null 2>&1; then up=1; break; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [[ -z "$up" ]]; then
		# llama-server refused the template: genq's engine must refuse it too.
		reason="$(grep -m1 -iE 'error|exception|failed' "$work/server.log" || echo "the server did not start")"
		jq -n --arg r "$reason" '{load_error: $r}' >"$out"
		kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""
		echo "$name: refused by llama-server"
		continue
	fi
	props="$(curl -s "localhost:$port/props")"
	# The server's enable_thinking: on when its analysis of the template
	# finds a reasoning block (common_chat_templates_support_enable_thinking).
	thinking="$(grep -o 'chat template, thinking = [01]' "$work/server.log" | grep -o '[01]$' || echo "")"
	[[ -n "$thinking" ]] || { echo "chattemplate-golden.sh: $name: the server did not say whether it thinks" >&2; exit 1; }
	echo '{}' >"$work/results.json"
	count="$(jq '.conversations | length' "$data/conversations.json")"
	for i in $(seq 0 $((count - 1))); do
		conv="$(jq -c --argjson i "$i" '.tools as $t | .conversations[$i] | {name, messages} + (if .tools then {tools: $t} else {} end)' "$data/conversations.json")"
		cname="$(jq -r .name <<<"$conv")"
		reply="$(curl -s "localhost:$port/apply-template" -d "$(jq -c 'del(.name)' <<<"$conv")")"
		jq --arg c "$cname" --argjson r "$reply" \
			'.[$c] = (if $r.prompt != null then {prompt: $r.prompt} else {error: ($r.error.message // ($r | tostring))} end)' \
			"$work/results.json" >"$work/next.json"
		mv "$work/next.json" "$work/results.json"
	done
	jq -n --argjson p "$props" --slurpfile r "$work/results.json" --arg d "$(date +%F)" --argjson th "$thinking" \
		'{date: $d, bos_token: $p.bos_token, eos_token: $p.eos_token, enable_thinking: ($th == 1), caps: $p.chat_template_caps, results: $r[0]}' >"$out"
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	n=$((n + 1))
done
if [[ "$(date +%F)" != "$date_before" ]]; then
	echo "chattemplate-golden.sh: the date changed while rendering; run it again" >&2
	exit 1
fi
echo "rendered $(jq '.conversations | length' "$data/conversations.json") conversations with $n templates into $data/golden"
