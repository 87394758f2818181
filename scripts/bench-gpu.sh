#!/usr/bin/env bash
# bench-gpu.sh: genq's text throughput on a CUDA GPU, through HTTP → NATS →
# worker, for `make bench-gpu`, beside llama.cpp's own llama-batched-bench
# from the same engine build. It runs on the GPU machine from a kit that
# `make gpu-kit` builds where Go is (binaries, the pinned llama.cpp sources,
# the bandwidth probe), so the GPU machine needs only CUDA, CMake and Ninja,
# and this repository's scripts/.
#
#   scripts/bench-gpu.sh start      # build the engine, write the models, sweep; in the background
#   scripts/bench-gpu.sh wait SECS  # follow the log until done or SECS pass; exit 0 when done
#   scripts/bench-gpu.sh run        # both, in the foreground
#
# Each phase leaves a marker in $GPU_WORK, so a run cut short resumes where
# it stopped. Results: $GPU_WORK/results/*.json, for `benchgpu report`, and
# beside each run llama-batched-bench's lines, *.llama-batched-bench.jsonl.
#
# GPU_KIT (default .gpu), GPU_WORK (default /tmp/genq-gpu), CUDA_ARCH
# (default 90, Hopper), GPU_ENGINE_FLAVOUR (default cuda; cpu-native makes
# a dry run of every phase on a machine without a GPU), GPU_MODELS (default
# "8b:B:8B BF16:1,4,16,64"; empty, the image phase alone): runs
# separated by ';', each size:variant:label:levels[:worker settings], the
# settings as space-separated NAME=value pairs (for example
# "8b:B:8B BF16 host:1,4:TEXT_DEVICE_SAMPLING=off" compares where rows are narrowed);
# a size of SIZE/WEIGHTS writes other weights than the variant's ("8b/f16").
# GPU_IMAGES (default 1; 0 skips it): after the text runs, the ggml image
# engine in process on SD3-medium's shapes with random fp16 weights, 1024×1024,
# 28 steps, with T5 and without: results/images/*.json (benchgpu image; the
# report of the text runs does not read them). The image engine runs on the
# same llama.cpp build as text (its ggml), so it needs no build of its own.
# GPU_IMAGE_GROUPS (default 0, the engine's default): the attention groups
# (benchgpu image --attention-groups) to run each of them with, one run each;
# GPU_IMAGE_T5 (default "on off"): which of the two image runs; GPU_IMAGE_PROFILE=1
# adds one more image to each, timed operation by operation (benchgpu image
# --profile); GPU_IMAGE_VARIANTS (default "default:"): runs of each of those,
# separated by ';', each name:words, the words benchgpu image flags (--x) or
# NAME=value settings of its environment (for example
# "default:;graphopt:GGML_CUDA_GRAPH_OPT=1;fresh:--fresh-graphs"). GPU_ENGINE_SAVE=DIR leaves the built engine's libraries there as
# engine-<flavour>.tar.xz.aa, .ab, … (pieces of 6 MB, small enough for the
# device tool to bring back: 7 pieces, 42 MB, for the cuda flavour at sm_90);
# GPU_ENGINE_TARBALL=FILE unpacks such a file, or its pieces FILE.aa, FILE.ab, …,
# instead of building (the same pinned sources and flavour: a run on a
# fresh machine then skips the build's 3 to 4 minutes).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo="$PWD"
kit="$(realpath "${GPU_KIT:-.gpu}")"
work="${GPU_WORK:-/tmp/genq-gpu}"
models="${GPU_MODELS-8b:B:8B BF16:1,4,16,64}" # empty: the image phase alone
mkdir -p "$work/results" "$work/logs"
log="$work/log"

say() { echo "[$(date -u +%T)] $*" | tee -a "$log" >&2; }

# build_engine: the pinned llama.cpp (scripts/llama.env) as the cuda flavour
# for this card alone, with llama-batched-bench, by the script `make engine`
# and the images use; its stamp makes a second call return at once.
build_engine() {
	[[ -s $work/engine.dir ]] && return 0
	local flavour=${GPU_ENGINE_FLAVOUR:-cuda}
	local tarball=${GPU_ENGINE_TARBALL:-}
	if [[ -n $tarball && ! -s $tarball && -s $tarball.aa ]]; then
		cat "$tarball".?? >"$work/engine.tar.xz" && tarball=$work/engine.tar.xz # the pieces GPU_ENGINE_SAVE leaves
	fi
	if [[ -n $tarball && -s $tarball ]]; then
		mkdir -p "$work/engine" && tar xJf "$tarball" -C "$work/engine" || return 1
		echo "$work/engine" >"$work/engine.dir"
		say "engine unpacked from $GPU_ENGINE_TARBALL ($(du -sh "$work/engine/lib" | cut -f1) of libraries)"
		return 0
	fi
	say "building llama.cpp ($flavour, CUDA_ARCH=${CUDA_ARCH:-90}) from the kit's sources"
	if [[ ! -f $work/llama-src/llama.cpp/.genq-llama-src ]]; then
		rm -rf "$work/llama-src" && mkdir -p "$work/llama-src" &&
			tar xzf "$kit/llama-src.tar.gz" -C "$work/llama-src" || return 1
	fi
	local dir tools=()
	[[ -n $models ]] && tools=(--tools) # the peer, for the text runs
	dir="$(GENQ_CACHE="$work/cache" LLAMA_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
		"$repo/scripts/build-llama.sh" --flavour "$flavour" "${tools[@]}" --src "$work/llama-src/llama.cpp" 2>>"$work/logs/engine.log")" || return 1
	echo "$dir" >"$work/engine.dir"
	say "engine built: $dir ($(du -sh "$dir/lib" | cut -f1) of libraries)"
	if [[ -n ${GPU_ENGINE_SAVE:-} ]]; then
		mkdir -p "$GPU_ENGINE_SAVE" &&
			tar cf - -C "$dir" lib | xz -T0 -6 | split -b 6M - "$GPU_ENGINE_SAVE/engine-$flavour.tar.xz." &&
			say "engine saved: $(ls "$GPU_ENGINE_SAVE"/engine-"$flavour".tar.xz.*) (cat them into one file for GPU_ENGINE_TARBALL)"
	fi
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

# gpu_env: the text worker loads the engine from LLAMA_LIB_DIR; cuBLAS and
# the CUDA runtime come from the toolkit.
gpu_env() {
	LLAMA_LIB_DIR="$(cat "$work/engine.dir")/lib"
	export LLAMA_LIB_DIR
	export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
}

# peer: llama-batched-bench from the same build on the same model, every
# layer on the GPU, flash attention on, 48 prompt and 256 generated tokens
# per sequence at each level (its decode column is the engine's ceiling:
# it samples nothing).
peer() { # size variant label levels
	local name=${3// /-} dir out
	dir="$(model_dir "$1" "$2")"
	out="$work/results/$name.llama-batched-bench.jsonl"
	[[ -s $out ]] && return 0
	gpu_env
	local max=1 l
	for l in ${4//,/ }; do ((l > max)) && max=$l; done
	say "llama-batched-bench on $3 at $4"
	"$(cat "$work/engine.dir")/bin/llama-batched-bench" -m "$(ls "$dir"/*.gguf)" -ngl 99 -fa on \
		-c $((max * (48 + 256))) -npp 48 -ntg 256 -npl "$4" --output-format jsonl \
		>"$out.partial" 2>"$work/logs/peer-$name.log" || { say "llama-batched-bench failed: $(tail -n 3 "$work/logs/peer-$name.log")"; return 1; }
	mv "$out.partial" "$out"
	say "$(cat "$out")"
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
	build_engine || { say "the engine build failed: $(tail -n 20 "$work/logs/engine.log")"; return 1; }
	gpu_env
	if [[ ! -f $dir/ok ]]; then
		rm -rf "$work/models"
		say "writing SD3-medium's shapes for the ggml engine (15.6 GB, fp16)"
		"$work/bin/genqctl" models tiny --variant C --engine ggml --size medium --dir "$dir" >>"$work/logs/models.log" 2>&1 || return 1
		touch "$dir/ok"
	fi
	local t5 groups variant vname words w name
	local IFS_was=$IFS
	IFS=';' read -ra variants <<<"${GPU_IMAGE_VARIANTS:-default:}"
	IFS=$IFS_was
	for t5 in ${GPU_IMAGE_T5:-on off}; do
		for groups in ${GPU_IMAGE_GROUPS:-0}; do
			for variant in "${variants[@]}"; do
				vname=${variant%%:*} words=${variant#*:}
				name=image-sd3-medium-t5-$t5
				[[ $groups != 0 ]] && name+=-g$groups
				[[ $vname != default ]] && name+=-$vname
				[[ -s $work/results/images/$name.json ]] && continue
				local flags=(--attention-groups "$groups" --png "$work/results/images/$name.png") envs=()
				for w in $words; do
					if [[ $w == --* ]]; then flags+=("$w"); else envs+=("$w"); fi
				done
				[[ $t5 == off ]] && flags+=(--no-t5)
				[[ ${GPU_IMAGE_PROFILE:-0} == 1 ]] && flags+=(--profile)
				say "image benchmark $name (${words:-as is}): 1024x1024, 28 steps"
				env "${envs[@]}" "$work/bin/benchgpu" image --dir "$dir" --size 1024 --steps 28 --images 3 "${flags[@]}" \
					--label "SD3-medium shapes fp16, T5 $t5${words:+, $words}" --out "$work/results/images/$name.json" >>"$work/logs/$name.log" 2>&1 ||
					{ say "image benchmark failed: $(tail -n 3 "$work/logs/$name.log")"; continue; }
				say "$(grep -m1 's/image' "$work/logs/$name.log")"
			done
		done
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
	build_engine &
	local b=$!
	copy_bandwidth
	local spec size variant label levels
	IFS=';' read -ra specs <<<"$models"
	for spec in "${specs[@]}"; do
		[[ -n $spec ]] || continue
		IFS=':' read -r size variant label levels settings <<<"$spec"
		write_model "$size" "$variant" || { say "writing $size failed"; continue; }
		if ((first)); then
			wait $b || { say "the engine build failed: $(tail -n 20 "$work/logs/engine.log")"; touch "$work/done"; return 1; }
			first=0
		fi
		sweep "$size" "$variant" "$label" "$levels" "$settings"
		peer "$size" "$variant" "$label" "$levels"
		does_not_fit "$size" "$variant"
	done
	if ((first)); then
		wait $b || { say "the engine build failed: $(tail -n 20 "$work/logs/engine.log")"; touch "$work/done"; return 1; }
	fi
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
