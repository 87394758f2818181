#!/usr/bin/env bash
# bench-gpu.sh: genq's text throughput on a CUDA GPU, through HTTP → NATS →
# worker, for `make bench-gpu`. It runs on the GPU machine from a kit that
# `make gpu-kit` builds where Go is (binaries, the pinned ggml sources, the
# bandwidth probe), so the GPU machine needs only CUDA, CMake and Ninja.
#
#   scripts/bench-gpu.sh start      # build ggml's CUDA backend, write the models, sweep; in the background
#   scripts/bench-gpu.sh wait SECS  # follow the log until done or SECS pass; exit 0 when done
#   scripts/bench-gpu.sh run        # both, in the foreground
#
# Each phase leaves a marker in $GPU_WORK, so a run cut short resumes where
# it stopped. Results: $GPU_WORK/results/*.json, for `benchgpu report`.
#
# GPU_KIT (default .gpu), GPU_WORK (default /tmp/genq-gpu), CUDA_ARCH
# (default 90, Hopper), GPU_MODELS (default "8b:B:8B BF16:1,4,16,64"): runs
# separated by ';', each size:variant:label:levels[:worker settings], the
# settings as space-separated NAME=value pairs (for example
# "8b:B:8B BF16 host:1,4:TEXT_NARROW=host" compares where rows are narrowed);
# a size of SIZE/WEIGHTS writes other weights than the variant's ("8b/f16").
# GPU_IMAGES (default 1; 0 skips it): after the text runs, the ggml image
# engine in process on SD3-medium's shapes with random fp16 weights, 1024×1024,
# 28 steps, with T5 and without: results/images/*.json (benchgpu image; the
# report of the text runs does not read them).
set -uo pipefail
cd "$(dirname "$0")/.."
kit="$(realpath "${GPU_KIT:-.gpu}")"
work="${GPU_WORK:-/tmp/genq-gpu}"
models="${GPU_MODELS:-8b:B:8B BF16:1,4,16,64}"
mkdir -p "$work/results" "$work/logs"
log="$work/log"

say() { echo "[$(date -u +%T)] $*" | tee -a "$log" >&2; }

build_ggml() {
	[[ -f $work/build.ok ]] && return 0
	say "building ggml's CUDA backend from the pinned module's sources"
	rm -rf "$work/src" && mkdir -p "$work/src" && tar xzf "$kit/ggml-src.tar.gz" -C "$work/src" || return 1
	cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DOLLAMA_RUNNER_DIR=cuda_v13 >>"$work/logs/cmake.log" 2>&1 || return 1
	cmake --build "$work/build" -j "$(nproc)" --target ggml-cuda ggml-base >>"$work/logs/cmake.log" 2>&1 || return 1
	touch "$work/build.ok"
	say "ggml CUDA backend built"
}

# model_dir size variant: where a run's model lives (size may be SIZE/WEIGHTS).
model_dir() { echo "$work/models/${1//\//-}-$2"; }

write_model() { # size variant
	local dir weights=()
	dir="$(model_dir "$1" "$2")"
	[[ -f $dir/ok ]] && return 0
	[[ $1 == */* ]] && weights=(--weights "${1#*/}")
	# The disk holds one big model at a time.
	rm -rf "$work/models"
	say "writing the $1 model for variant $2"
	"$work/bin/genqctl" models tiny --variant "$2" --size "${1%%/*}" "${weights[@]}" --dir "$dir" >>"$work/logs/models.log" 2>&1 || return 1
	touch "$dir/ok"
	say "model $1-$2 written: $(du -sh "$dir" | cut -f1)"
}

copy_bandwidth() {
	[[ -s $work/copybw.txt ]] && return 0
	nvcc -O2 -o "$work/copybw" "$kit/copybw.cu" >>"$work/logs/nvcc.log" 2>&1 && "$work/copybw" >"$work/copybw.txt" || return 1
	say "device copy bandwidth: $(cat "$work/copybw.txt") GB/s"
}

gpu_env() {
	export OLLAMA_LIBRARY_PATH="$work/build/lib/ollama"
	export LD_LIBRARY_PATH="$work/build/lib/ollama:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
}

# sweep size variant label levels: the api with its embedded NATS and one
# worker, SLOTS unset so the worker sizes its slots from free memory.
sweep() {
	local size=$1 variant=$2 label=$3 levels=$4 settings=${5:-}
	local name=${label// /-} dir
	dir="$(model_dir "$size" "$variant")"
	[[ -s $work/results/$name.json ]] && return 0
	gpu_env
	say "sweep $label at concurrency $levels"
	VARIANT=$variant PORT=18080 EMBEDDED_NATS_PORT=14222 EMBEDDED_NATS_STORE="$work/nats" NATS_URL="" \
		"$work/bin/api" >"$work/logs/api-$name.log" 2>&1 &
	local api=$!
	# shellcheck disable=SC2086 # settings are NAME=value words
	env VARIANT=$variant MODEL_DIR="$dir" NATS_URL=nats://127.0.0.1:14222 METRICS_ADDR=127.0.0.1:19091 \
		TEXT_IGNORE_EOS=true TEXT_MAX_NEW_TOKENS=256 $settings \
		"$work/bin/worker" >"$work/logs/worker-$name.log" 2>&1 &
	local worker=$!
	local ok=1
	for _ in $(seq 600); do
		if curl -sf localhost:18080/ 2>/dev/null | grep -q '"live_workers":[1-9]'; then ok=0; break; fi
		kill -0 $worker 2>/dev/null || break
		sleep 0.5
	done
	if ((ok)); then
		say "the worker did not come up: $(tail -n 3 "$work/logs/worker-$name.log")"
	else
		say "worker up: $(grep -o '"msg":"text model ready".*' "$work/logs/worker-$name.log" | head -c 600)"
		"$work/bin/benchgpu" sweep --url http://127.0.0.1:18080 --model "$(ls "$dir"/*.gguf)" --label "$label" \
			--levels "$levels" --copy-gbps "$(cat "$work/copybw.txt" 2>/dev/null || echo 0)" \
			--out "$work/results/$name.json" 2>&1 | tee -a "$log" || ok=1
	fi
	kill -TERM $worker 2>/dev/null; wait $worker 2>/dev/null
	kill -TERM $api 2>/dev/null; wait $api 2>/dev/null
	return $ok
}

# image_bench: SD3-medium's shapes on the ggml image engine, with and
# without T5. The disk holds one big model at a time: the text model goes.
image_bench() {
	[[ ${GPU_IMAGES:-1} == 0 ]] && return 0
	local dir="$work/models/sd3-medium"
	mkdir -p "$work/results/images"
	gpu_env
	if [[ ! -f $dir/ok ]]; then
		rm -rf "$work/models"
		say "writing SD3-medium's shapes for the ggml engine (15.6 GB, fp16)"
		"$work/bin/genqctl" models tiny --variant C --engine ggml --size medium --dir "$dir" >>"$work/logs/models.log" 2>&1 || return 1
		touch "$dir/ok"
	fi
	local t5 name
	for t5 in on off; do
		name=image-sd3-medium-t5-$t5
		[[ -s $work/results/images/$name.json ]] && continue
		local flags=()
		[[ $t5 == off ]] && flags=(--no-t5)
		say "image benchmark, T5 $t5: 1024x1024, 28 steps"
		"$work/bin/benchgpu" image --dir "$dir" --size 1024 --steps 28 --images 3 "${flags[@]}" \
			--label "SD3-medium shapes fp16, T5 $t5" --out "$work/results/images/$name.json" >>"$work/logs/$name.log" 2>&1 ||
			{ say "image benchmark failed: $(tail -n 3 "$work/logs/$name.log")"; continue; }
		say "$(tail -n 1 "$work/logs/$name.log")"
	done
}

# does_not_fit: a start whose slots cannot fit must fail fast, in one line.
does_not_fit() { # size variant
	[[ -s $work/results/does-not-fit.txt ]] && return 0
	gpu_env
	local start=$SECONDS
	VARIANT=$2 MODEL_DIR="$(model_dir "$1" "$2")" NATS_URL=nats://127.0.0.1:1 METRICS_ADDR=127.0.0.1:19092 \
		SLOTS=1024 TEXT_CONTEXT_SIZE=8192 timeout 60 "$work/bin/worker" >"$work/logs/does-not-fit.log" 2>&1
	local rc=$?
	{
		echo "SLOTS=1024 TEXT_CONTEXT_SIZE=8192 on the $1 model: exit $rc after $((SECONDS - start)) s"
		tail -n 1 "$work/logs/does-not-fit.log"
	} >"$work/results/does-not-fit.txt"
	say "$(cat "$work/results/does-not-fit.txt")"
}

# unpack_bins: the kit's binaries come xz-compressed.
unpack_bins() {
	mkdir -p "$work/bin"
	local f
	for f in "$kit"/bin/*; do
		case $f in
		*.xz) xz -dc "$f" >"$work/bin/$(basename "$f" .xz)" ;;
		*) cp "$f" "$work/bin/" ;;
		esac
		chmod +x "$work/bin/$(basename "$f" .xz)"
	done
}

run_all() {
	: >"$log"
	unpack_bins || { say "cannot unpack the kit's binaries"; touch "$work/done"; return 1; }
	local first=1
	build_ggml &
	local b=$!
	copy_bandwidth
	local spec size variant label levels
	IFS=';' read -ra specs <<<"$models"
	for spec in "${specs[@]}"; do
		IFS=':' read -r size variant label levels settings <<<"$spec"
		write_model "$size" "$variant" || { say "writing $size failed"; continue; }
		if ((first)); then
			wait $b || { say "the ggml build failed: $(tail -n 20 "$work/logs/cmake.log")"; touch "$work/done"; return 1; }
			first=0
		fi
		sweep "$size" "$variant" "$label" "$levels" "$settings"
		does_not_fit "$size" "$variant"
	done
	image_bench
	say "done"
	touch "$work/done"
}

case "${1:-run}" in
start)
	rm -f "$work/done"
	setsid nohup bash "$0" run >/dev/null 2>&1 </dev/null &
	echo "started; follow with: $0 wait SECONDS" >&2
	;;
wait)
	deadline=$((SECONDS + ${2:-540}))
	while ((SECONDS < deadline)) && [[ ! -f $work/done ]]; do sleep 5; done
	tail -n 40 "$log"
	[[ -f $work/done ]]
	;;
run)
	run_all
	;;
*)
	echo "usage: $0 start|wait SECONDS|run" >&2
	exit 2
	;;
esac
