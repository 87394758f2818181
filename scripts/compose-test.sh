#!/usr/bin/env bash
# compose-test.sh: genq's compose stack on a real Docker engine, end to end
# (make compose-test). It builds the api image and the CPU worker image with
# a tiny random-weight model, starts `--profile cpu`, and checks through the
# published port 8080: the seed's routes and their 400s, OpenAI chat whole
# and streamed, a 50-line batch through the genqctl service, a worker killed
# in the middle of 20 requests (all answered, none run twice), a SIGTERM
# drain within stop_grace_period, no secret in any image layer or history,
# and variant C's PNG on either image engine. It leaves nothing running.
#
# Needs a Docker engine with Compose v2 and BuildKit, and curl.
# Images it cannot pull must exist locally (golang:1.26-bookworm,
# debian:bookworm-slim, gcr.io/distroless/static-debian12:nonroot,
# nats:2.11-alpine, docker/dockerfile:1.7).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'compose-test: %s\n' "$*"; }
fail() {
	say "FAIL: $*"
	failed=$((failed + 1))
}
pass() {
	say "ok: $*"
	passed=$((passed + 1))
}
passed=0 failed=0

docker info >/dev/null 2>&1 || {
	echo "compose-test: no Docker engine answers (docker info failed); start a Docker engine with Compose v2 (docs/deploy.md, "Compose on one machine")" >&2
	exit 1
}
docker compose version >/dev/null 2>&1 || {
	echo "compose-test: docker compose (v2) is not installed" >&2
	exit 1
}

# Where no registry can be reached, the slim runtime image of the CPU target
# has the local Debian image as its stand-in.
if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1 && ! docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
	if docker image inspect debian:bookworm >/dev/null 2>&1; then
		say "debian:bookworm-slim cannot be pulled: tagging the local debian:bookworm as its stand-in"
		docker tag debian:bookworm debian:bookworm-slim
	fi
fi

scripts/nats-secrets.sh
work="$(mktemp -d)"
project=genq-compose-test
api=http://127.0.0.1:8080
export MODEL_SOURCE=tiny
# A hub token that must never reach an image: the build mounts it as a
# secret (unused with MODEL_SOURCE=tiny), and the scan below looks for it.
marker="hf_composetest$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s' "$marker" >"$work/hf_token"
export HF_TOKEN_FILE="$work/hf_token"
# One slot and long answers, so the worker is still busy when it is killed
# or stopped.
cat >"$work/override.yml" <<'EOF'
services:
  worker-cpu:
    environment:
      SLOTS: "1"
      TEXT_MAX_NEW_TOKENS: "1024"
EOF

dc() { docker compose -p "$project" --env-file .genq/nats.env -f docker-compose.yml -f "$work/override.yml" "$@"; }
cleanup() {
	dc --profile cpu --profile tools down -v --remove-orphans >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# status METHOD PATH [BODY]: prints the HTTP status, the body in $work/body.
status() {
	local args=(-sS -o "$work/body" -w '%{http_code}' -X "$1" "$api$2" --max-time 120)
	if [[ $# -ge 3 ]]; then args+=(-H 'Content-Type: application/json' --data-binary "$3"); fi
	curl "${args[@]}" || true
}
expect() { # expect NAME WANT_STATUS GOT_STATUS [grep pattern of the body]
	if [[ $3 != "$2" ]]; then
		fail "$1: status $3, want $2 ($(head -c 200 "$work/body"))"
	elif [[ $# -ge 4 ]] && ! grep -q -- "$4" "$work/body"; then
		fail "$1: body $(head -c 200 "$work/body"), want $4"
	else
		pass "$1 ($3)"
	fi
}

up() { # up VARIANT: builds (timed) and starts the cpu profile
	export VARIANT=$1
	local t0=$SECONDS
	dc --profile cpu build api worker-cpu
	say "variant $1: api and CPU worker images built in $((SECONDS - t0)) s"
	t0=$SECONDS
	dc --profile cpu up -d --wait
	say "variant $1: stack healthy in $((SECONDS - t0)) s"
}

sizes() {
	for img in "$@"; do
		say "image $img: $(docker image inspect -f '{{.Size}}' "$img" | awk '{printf "%.1f MB", $1/1e6}')"
	done
}

# ---- variant B
up B
sizes genq-api:local genq-worker-cpu:B

expect "GET /" 200 "$(status GET /)" '"message":"Hello World"'
expect "GET /readiness" 200 "$(status GET /readiness)" '"status":"ready"'
expect "POST /generate" 200 "$(status POST /generate '{"text":"Write a haiku about queues."}')" '"generated_text":'
expect "POST /generate {}" 400 "$(status POST /generate '{}')" '"error":"text field is required"'
expect "POST /generate malformed" 400 "$(status POST /generate '{"text":')" '"error":'
expect "POST /generate text not a string" 400 "$(status POST /generate '{"text":7}')" '"error":'
expect "GET /nowhere" 404 "$(status GET /nowhere)" '"error":'
expect "chat completion" 200 "$(status POST /v1/chat/completions '{"model":"genq","messages":[{"role":"user","content":"hi"}],"max_tokens":16}')" '"object":"chat.completion"'
expect "streamed chat completion" 200 "$(status POST /v1/chat/completions '{"model":"genq","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":16}')" 'data: \[DONE\]'

# A batch of 50 straight onto NATS, from compose's network.
mkdir -p "$work/batch"
chmod 777 "$work/batch"
for i in $(seq 1 50); do printf '{"id":"line-%d","text":"batch prompt %d"}\n' "$i" "$i"; done >"$work/batch/prompts.jsonl"
t0=$SECONDS
if dc --profile tools run --rm -T -v "$work/batch:/batch" genqctl submit --in /batch/prompts.jsonl --out /batch/results >"$work/submit.log" 2>&1; then
	ok=$(grep -c '"generated_text"' "$work/batch/results/results.jsonl" || true)
	if [[ $ok == 50 ]]; then pass "genqctl submit: 50 of 50 lines answered in $((SECONDS - t0)) s"; else fail "genqctl submit: $ok of 50 lines answered"; fi
else
	fail "genqctl submit exited $?: $(tail -5 "$work/submit.log")"
fi

# The worker crashes in the middle of 20 requests; its restart policy brings
# it back and every request is answered, none run twice. The crash is a
# SIGKILL of the container's process, as the OOM killer sends: Docker counts
# `docker kill` as a manual stop, after which no restart policy applies.
worker=$(dc ps -q worker-cpu)
for i in $(seq 1 20); do
	curl -sS -o /dev/null -w '%{http_code}\n' --max-time 170 -X POST "$api/v1/completions" \
		-H 'Content-Type: application/json' \
		-d "{\"model\":\"genq\",\"prompt\":\"kill $i\",\"max_tokens\":1000,\"ignore_eos\":true}" >"$work/kill.$i" &
done
answered_by() { cat "$work"/"$1".* 2>/dev/null | grep -c '^200$' || true; }
# until_answered PREFIX N: waits (at most 60 s) until N of the requests are answered.
until_answered() {
	local deadline=$((SECONDS + 60))
	while (($(answered_by "$1") < $2 && SECONDS < deadline)); do sleep 0.1; done
}
until_answered kill 2
restarts_before=$(docker inspect -f '{{.RestartCount}}' "$worker")
early=$(answered_by kill)
crashed=1
if kill -9 "$(docker inspect -f '{{.State.Pid}}' "$worker")" 2>/dev/null; then
	say "killed the worker's process (SIGKILL) with 20 requests in flight"
else # a remote or rootless engine: kill it through Docker and start it again
	docker kill "$worker" >/dev/null
	say "docker kill of the worker with 20 requests in flight; starting it again by hand"
	crashed=0
	dc start worker-cpu >/dev/null
fi
wait
answered=$(answered_by kill)
restarts=$(($(docker inspect -f '{{.RestartCount}}' "$worker") - restarts_before))
docker logs "$worker" >"$work/worker.log" 2>&1
twice=$(grep '"msg":"job done"' "$work/worker.log" | grep -o '"job_id":"[^"]*"' | sort | uniq -d | wc -l)
if [[ $answered == 20 && $twice == 0 && $early -lt 20 ]] && ((crashed == 0 || restarts >= 1)); then
	pass "worker killed mid-load ($early answered before): 20 of 20 answered, 0 run twice, restarted by its policy $restarts time(s)"
else
	fail "worker killed mid-load ($early answered before): $answered of 20 answered, $twice run twice, restarted by its policy $restarts time(s)"
fi
dc up -d --wait worker-cpu >/dev/null 2>&1 || true

# SIGTERM drains: an answer in flight when the worker is stopped is finished
# before it exits, well within stop_grace_period. The worker's CPU is cut to
# a twentieth first, so that an answer takes seconds and the stop comes in
# the middle of one.
docker update --cpus 0.05 "$worker" >/dev/null
for i in $(seq 1 3); do
	curl -sS -o /dev/null -w '%{http_code}\n' --max-time 170 -X POST "$api/v1/completions" \
		-H 'Content-Type: application/json' \
		-d "{\"model\":\"genq\",\"prompt\":\"drain $i\",\"max_tokens\":1000,\"ignore_eos\":true}" >"$work/drain.$i" &
done
sleep 2
t0=$SECONDS
dc stop worker-cpu >/dev/null 2>&1
stopped=$((SECONDS - t0))
code=$(docker inspect -f '{{.State.ExitCode}}' "$worker")
docker logs "$worker" >"$work/worker.log" 2>&1
docker update --cpus "$(nproc)" "$worker" >/dev/null
dc start worker-cpu >/dev/null 2>&1
wait
answered=$(answered_by drain)
# The last "draining" line counts the jobs in flight; one of them must have
# finished after it.
if awk '/"msg":"draining"/ { d = 1; busy = /"jobs_in_flight":[1-9]/; done = 0; next }
	d && /"msg":"job done"/ { done = 1 }
	END { exit !(busy && done) }' "$work/worker.log" && [[ $code == 0 && $answered == 3 ]]; then
	pass "compose stop during an answer: the worker finished it and exited 0 after $stopped s (stop_grace_period 330 s); 3 of 3 answered"
else
	fail "compose stop: exit code $code after $stopped s, $answered of 3 answered; $(grep '"msg":"draining"' "$work/worker.log" | tail -1)"
fi

# No secret in any layer or in the history of the images.
secrets=("$marker")
while IFS='=' read -r _ value; do secrets+=("$value"); done <.genq/nats.env
leaks=0
for img in genq-api:local genq-worker-cpu:B; do
	docker save "$img" -o "$work/image.tar"
	mkdir -p "$work/layers" && tar -xf "$work/image.tar" -C "$work/layers"
	for f in "$work"/layers/*/layer.tar; do tar -xf "$f" -C "$work/layers" 2>/dev/null || true; done
	history=$(docker history --no-trunc "$img")
	for s in "${secrets[@]}"; do
		if grep -rqaF -- "$s" "$work/layers" || grep -qF -- "$s" <<<"$history"; then
			leaks=$((leaks + 1))
			say "a secret is in $img"
		fi
	done
	rm -rf "$work/layers" "$work/image.tar"
done
if [[ $leaks == 0 ]]; then pass "no hub token or NATS password in the layers or history of either image"; else fail "$leaks secrets found in images"; fi

dc --profile cpu down -v >/dev/null 2>&1

# ---- variant C on the CPU, on each image engine: one PNG. The default,
# ggml, runs SD3 on the image's own llama.cpp libraries from the tiny
# model's GGUF files; IMAGE_ENGINE=onnx on ONNX Runtime.
for engine in ggml onnx; do
	if [[ $engine == onnx ]]; then export IMAGE_ENGINE=onnx; fi
	up C
	if [[ $engine == ggml ]]; then sizes genq-worker-cpu:C; fi
	code=$(curl -sS -o "$work/fox-$engine.png" -w '%{http_code}' --max-time 170 -X POST "$api/generate" -H 'Content-Type: application/json' -d '{"text":"a red fox"}' || true)
	logged=$(dc --profile cpu logs worker-cpu 2>/dev/null | grep -o '"engine":"[a-z]*"' | head -n 1 || true)
	want=$engine
	if [[ $engine == onnx ]]; then want=onnxruntime; fi # the engine's name in its log
	if [[ $code == 200 && $logged == "\"engine\":\"$want\"" ]] && head -c 8 "$work/fox-$engine.png" | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'; then
		pass "variant C on $engine: POST /generate answered a PNG of $(wc -c <"$work/fox-$engine.png") bytes"
	else
		fail "variant C on $engine: POST /generate status $code, worker log $logged"
	fi
	dc --profile cpu down -v >/dev/null 2>&1
done
unset IMAGE_ENGINE

left=$(docker ps -q --filter "label=com.docker.compose.project=$project" | wc -l)
if [[ $left == 0 ]]; then pass "compose down left no container running"; else fail "$left containers still running"; fi

say "$passed passed, $failed failed"
[[ $failed == 0 ]]
