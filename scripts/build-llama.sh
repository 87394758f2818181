#!/usr/bin/env bash
# build-llama.sh: builds the pinned llama.cpp engine (scripts/llama.env) that
# the text backend loads: libllama and ggml's libraries, and with --tools the
# peers the benchmarks compare genq with (llama-server, llama-batched-bench).
#
#   scripts/build-llama.sh [--flavour F] [--tools] [--stock] [--src DIR] [--dry-run] [-- CMAKE_FLAG...]
#   scripts/build-llama.sh --export-src FILE.tar.gz
#
# Flavours:
#   cpu-native    this machine's CPU (GGML_NATIVE=ON): `make engine`
#   cpu-portable  any x86-64 or arm64 CPU: ggml builds its CPU backend once per
#                 instruction set and loads the best at run time (GGML_BACKEND_DL,
#                 GGML_CPU_ALL_VARIANTS): the CPU worker image
#   cuda          NVIDIA GPUs (GGML_CUDA=ON) for LLAMA_CUDA_ARCHITECTURES
#                 (default in scripts/llama.env), with the CPU variants beside it
#
# It installs into ${GENQ_CACHE:-~/.cache/genq}/llama.cpp/<commit12>-<flavour>,
# with -<hash> appended when extra CMake flags are given: lib/ holds every
# shared library in one flat directory (symlinks kept) and the stamp
# genq-engine.json, bin/ the tools. It prints that directory on stdout, and
# a line per phase on stderr. With a matching stamp it exits at once; it
# builds in a temporary directory and renames it into place, so a cut-short
# build leaves nothing half-made. --src builds from sources that
# --export-src wrote (the GPU kit, where npm cannot be reached).
#
# The sources get the patches in scripts/llama-patches/ (in name order)
# before they build: changes to ggml's CPU kernels that genq's graphs
# need and the pinned release lacks, each one a `git apply` patch that
# says why in its header (docs/engine.md, "Patches on the pinned
# llama.cpp"). The stamp's id covers their contents. --stock builds the
# release as it is, without them, into <commit12>-<flavour>-stock: the
# peer that the parity test and make bench hold genq to, so that a patch
# that changes results or speed shows.
#
# The CPU flavours also build ggml's BLAS backend, when OpenBLAS and
# pkg-config are installed (Debian: libopenblas-dev pkg-config), as a
# module of its own in lib/blas/:
# the image engine opens it to run its matrix products through OpenBLAS
# (internal/tensor/blas.go), and the text engine, which loads lib/'s
# backends, never sees it.
#
# Environment: GENQ_CACHE, LLAMA_CUDA_ARCHITECTURES, LLAMA_CMAKE_FLAGS (extra
# flags, space-separated), LLAMA_JOBS (default: all cores), LLAMA_BLAS (off:
# no BLAS module even where OpenBLAS is installed). Needs git, CMake (Ninja
# when present), a C++17 compiler, and npm or curl for the sources.
set -euo pipefail
# The body is one block, read whole before it runs, so an edit of this file
# during a build does not change the build under it.
{
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/llama.env
. "$here/llama.env"

say() { echo "build-llama [$(elapsed)]: $*" >&2; }
die() {
	say "$*"
	exit 1
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

flavour=cpu-native tools=0 stock=0 src_dir="" export_to="" dry=0
extra=()
# LLAMA_CMAKE_FLAGS is split on spaces on purpose: one flag per word.
# shellcheck disable=SC2206
[[ -n ${LLAMA_CMAKE_FLAGS:-} ]] && extra=(${LLAMA_CMAKE_FLAGS})
while (($#)); do
	case $1 in
	--flavour) flavour=${2:?--flavour needs a name}; shift 2 ;;
	--flavour=*) flavour=${1#*=}; shift ;;
	--tools) tools=1; shift ;;
	--stock) stock=1; shift ;;
	--src) src_dir=${2:?--src needs a directory}; shift 2 ;;
	--export-src) export_to=${2:?--export-src needs a file}; shift 2 ;;
	--dry-run) dry=1; shift ;;
	-h | --help) usage ;;
	--) shift; extra+=("$@"); break ;;
	*) die "unknown argument $1 (--help lists them)" ;;
	esac
done

commit12=${LLAMA_COMMIT:0:12}
root="${GENQ_CACHE:-$HOME/.cache/genq}/llama.cpp"
started=$SECONDS

elapsed() {
	local s=$((SECONDS - started))
	printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# The CMake flags every flavour shares. LLAMA_CURL is not passed: v0.5.0
# dropped libcurl and only warns that the option is ignored.
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic linker
flags=(
	-DCMAKE_BUILD_TYPE=Release
	-DBUILD_SHARED_LIBS=ON
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
	-DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF
	# Tools are configured always and built only with --tools, so the
	# libraries of a libs-only build and of a tools build are the same.
	-DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
	-DLLAMA_BUILD_APP=OFF
	# llama-server's web page would come from npm or a download at build
	# time; the benchmarks speak its HTTP API only.
	-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
	-DLLAMA_OPENSSL=OFF
	# Libraries find each other, and the tools in bin/ find lib/, wherever
	# the directory is copied (the cache, lib/llama, /opt/genq/lib/llama).
	-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN:$ORIGIN/../lib'
)
cuda_arch=${LLAMA_CUDA_ARCHITECTURES:-$LLAMA_CUDA_ARCHITECTURES_DEFAULT}
case $flavour in
cpu-native) flags+=(-DGGML_NATIVE=ON) ;;
cpu-portable) flags+=(-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON) ;;
cuda)
	# NCCL only serves tensor parallelism across GPUs; a worker drives one
	# GPU, and the runtime image need not carry the library.
	flags+=(-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON
		-DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF)
	if [[ $cuda_arch == "$LLAMA_CUDA_ARCHITECTURES_DEFAULT" ]]; then
		flags+=("-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch")
	else
		extra+=("-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch")
	fi
	;;
*) die "unknown flavour $flavour: want cpu-native, cpu-portable or cuda" ;;
esac

# ggml's BLAS backend: with OpenBLAS's header and library at hand, and
# pkg-config, through which ggml's CMake finds them, on the CPU flavours (a
# CUDA worker multiplies on its GPU).
blas=off
if [[ $flavour != cuda && ${LLAMA_BLAS:-auto} != off ]] && command -v pkg-config >/dev/null &&
	echo '#include <cblas.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1 &&
	ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0 '; then
	blas=openblas
fi
# The stock build is the peer for text; the image engine never loads it.
((stock)) && blas=off

sha() { sha256sum | cut -c"1-$1"; }
patches=()
if ((!stock)); then
	for p in "$here"/llama-patches/*.patch; do [[ -f $p ]] && patches+=("$p"); done
fi
patched="none"
((${#patches[@]})) && patched="$(cat "${patches[@]}" | sha 64)"
key="$commit12-$flavour"
((stock)) && key+="-stock"
((${#extra[@]})) && key+="-$(printf '%s\n' "${extra[@]}" | sha 8)"
flags+=("${extra[@]}")
dir="$root/$key"
stamp="$dir/lib/genq-engine.json"

# The stamp's id covers what the build depends on; a native build also
# depends on the CPU it ran on, so a cache carried to another machine
# rebuilds instead of dying of an illegal instruction.
cpu=""
[[ $flavour == cpu-native ]] && cpu="$(uname -m) $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null | sha 16)"
id="$(printf '%s\n' "$LLAMA_COMMIT" "$flavour" "$cpu" "${flags[@]}" "blas=$blas" "patches=$patched" | sha 64)"

tool_targets=(llama-server llama-batched-bench)
up_to_date() {
	[[ -f $stamp ]] && grep -q "\"id\": \"$id\"" "$stamp" || return 1
	local t
	if ((tools)); then
		for t in "${tool_targets[@]}"; do [[ -x $dir/bin/$t ]] || return 1; done
	fi
}

if ((dry)); then
	state="missing"
	[[ -e $dir ]] && state="stale"
	up_to_date && state="up to date"
	say "$key ($state); BLAS module: $blas; patches: ${#patches[@]}; cmake flags: ${flags[*]}"
	echo "$dir"
	exit 0
fi
if [[ -z $export_to ]] && up_to_date; then
	echo "$dir"
	exit 0
fi

need() { command -v "$1" >/dev/null || die "$1 is needed ($2)"; }
mkdir -p "$root/.tmp"

src="$root/src-$commit12"

# One build at a time per cache: a second make, or a second BuildKit build
# sharing the cache mount, waits here and then finds the stamp. An export
# of sources already fetched only reads them.
if command -v flock >/dev/null && [[ -z $export_to || ! -f $src/.genq-verified ]]; then
	exec 9>"$root/.lock"
	if ! flock -n 9; then
		say "another build holds $root/.lock; waiting"
		flock 9
	fi
	if [[ -z $export_to ]] && up_to_date; then
		echo "$dir"
		exit 0
	fi
	# Left by a build that was killed: none runs now.
	rm -rf "${root:?}/.tmp/"*
fi

tmp=""
poller=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	[[ -n $poller ]] && kill "$poller" 2>/dev/null
	[[ -n $tmp ]] && rm -rf "$tmp"
	return 0
}
trap cleanup EXIT

# fetch_src: the pinned sources, checked, as a git checkout in the cache.
fetch_src() {
	[[ -f $src/.genq-verified ]] && return 0
	need git "to unpack the sources from their git bundle"
	tmp="$(mktemp -d "$root/.tmp/fetch.XXXXXX")"
	local tgz="$tmp/$LLAMA_NPM_PACKAGE-$LLAMA_NPM_VERSION.tgz"
	say "fetch: $LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION (about 36 MB)"
	if command -v npm >/dev/null; then
		(cd "$tmp" && npm pack --silent "$LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION" </dev/null >/dev/null) ||
			die "npm pack $LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION failed"
	else
		need curl "to fetch the sources without npm"
		curl -fsSL --retry 5 -o "$tgz" "$LLAMA_NPM_TARBALL" </dev/null || die "cannot fetch $LLAMA_NPM_TARBALL"
	fi
	[[ -s $tgz ]] || die "npm pack wrote no $tgz"

	local want got
	want="$(printf '%s' "${LLAMA_NPM_INTEGRITY#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
	got="$(sha512sum "$tgz" | cut -d' ' -f1)"
	[[ $got == "$want" ]] || die "$LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION does not match the pinned integrity in scripts/llama.env"

	tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json ||
		die "the package holds no llama/gitRelease.bundle"
	local tag
	tag="$(grep -o '"tag": *"[^"]*"' "$tmp/package/llama/llama.cpp.info.json" | sed 's/.*"\([^"]*\)"$/\1/')"
	[[ $tag == "$LLAMA_TAG" ]] || die "the package's llama.cpp is tagged ${tag:-nothing}, not $LLAMA_TAG"

	say "unpack: the git bundle, checking commit $commit12"
	git -c advice.detachedHead=false clone --quiet "$tmp/package/llama/gitRelease.bundle" "$tmp/src" </dev/null ||
		die "cannot clone the package's git bundle"
	got="$(git -C "$tmp/src" rev-parse HEAD)"
	[[ $got == "$LLAMA_COMMIT" ]] || die "the bundle's commit is $got, not the pinned $LLAMA_COMMIT"
	echo "$LLAMA_COMMIT $LLAMA_TAG" >"$tmp/src/.genq-verified"
	rm -rf "$src"
	mv "$tmp/src" "$src"
	rm -rf "$tmp"
	tmp=""
}

# The folders the GPU kit leaves out of the sources: other GPUs' backends,
# the test vocabularies and the docs (100 MB of the 175).
export_excludes=(models docs media ggml/src/ggml-vulkan ggml/src/ggml-metal ggml/src/ggml-hip
	ggml/src/ggml-sycl ggml/src/ggml-opencl ggml/src/ggml-cann ggml/src/ggml-musa)

if [[ -n $export_to ]]; then
	fetch_src
	tmp="$(mktemp -d)"
	mkdir "$tmp/llama.cpp"
	ex=()
	for p in "${export_excludes[@]}"; do ex+=(":(exclude)$p"); done
	git -C "$src" archive --format=tar HEAD -- . "${ex[@]}" | tar -x -C "$tmp/llama.cpp"
	echo "$LLAMA_COMMIT $LLAMA_TAG" >"$tmp/llama.cpp/.genq-llama-src"
	mkdir -p "$(dirname "$export_to")"
	tar -czf "$export_to.partial" -C "$tmp" llama.cpp && mv "$export_to.partial" "$export_to"
	say "sources of $LLAMA_TAG ($commit12) written to $export_to ($(du -h "$export_to" | cut -f1))"
	exit 0
fi

if [[ -n $src_dir ]]; then
	mark="$(cat "$src_dir/.genq-llama-src" 2>/dev/null || true)"
	[[ $mark == "$LLAMA_COMMIT $LLAMA_TAG" ]] ||
		die "$src_dir is not the pinned llama.cpp $LLAMA_TAG ($commit12): its .genq-llama-src reads '${mark:-nothing}' (write it with --export-src)"
	src="$(cd "$src_dir" && pwd)"
else
	fetch_src
fi

need cmake "to build llama.cpp"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
jobs=${LLAMA_JOBS:-$(nproc)}
targets=(llama)
((tools)) && targets+=("${tool_targets[@]}")
tmp="$(mktemp -d "$root/.tmp/$key.XXXXXX")"
log="$root/$key.log"
: >"$log"

# The patches go on a copy, so the cached sources stay the release's.
if ((${#patches[@]})); then
	need git "to apply scripts/llama-patches"
	say "patch: ${#patches[@]} patches from scripts/llama-patches"
	mkdir "$tmp/src"
	tar -C "$src" --exclude=.git -cf - . | tar -x -C "$tmp/src"
	for p in "${patches[@]}"; do
		# No enclosing repository: git apply works on the folder as patch(1) would.
		(cd "$tmp/src" && GIT_CEILING_DIRECTORIES="$tmp" git apply "$p") >>"$log" 2>&1 ||
			die "${p##*/} does not apply to llama.cpp $LLAMA_TAG ($commit12)"
	done
	src="$tmp/src"
fi

say "configure: $key (log: $log)"
nice -n 10 cmake -S "$src" -B "$tmp/build" "${gen[@]}" "${flags[@]}" </dev/null >>"$log" 2>&1 || {
	tail -n 30 "$log" >&2
	die "cmake could not configure $key"
}

say "build: ${targets[*]} with $jobs jobs"
# A line every 30 s, from the build tool's own [done/total] or [ nn%] marks.
# Its sleep is killed with it, so nothing holds the lock or the caller's
# pipes after the script ends.
(
	trap 'kill "$nap" 2>/dev/null; exit 0' TERM
	while :; do
		sleep 30 &
		nap=$!
		wait "$nap"
		mark="$(tail -n 400 "$log" | grep -aoE '^\[ *[0-9]+(/[0-9]+|%)\]' | tail -n 1 || true)"
		say "build: ${mark:-starting}"
	done
) >/dev/null 9>&- &
poller=$!
nice -n 10 cmake --build "$tmp/build" -j "$jobs" --target "${targets[@]}" </dev/null >>"$log" 2>&1 || {
	tail -n 30 "$log" >&2
	die "the build of $key failed"
}
kill "$poller" 2>/dev/null || true
poller=""

# The BLAS module: a loadable backend (GGML_BACKEND_DL) needs only ggml's
# base library, whose sources and ABI it shares with the build above; it
# finds that library in lib/ (RUNPATH $ORIGIN/..).
if [[ $blas == openblas ]]; then
	say "build: ggml-blas (OpenBLAS)"
	nice -n 10 cmake -S "$src" -B "$tmp/blas" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
		-DGGML_BACKEND_DL=ON -DGGML_CPU=OFF -DGGML_NATIVE=OFF -DGGML_BLAS=ON -DGGML_BLAS_VENDOR=OpenBLAS \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
		-DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
		-DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
		-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN/..' </dev/null >>"$log" 2>&1 &&
		nice -n 10 cmake --build "$tmp/blas" -j "$jobs" --target ggml-blas </dev/null >>"$log" 2>&1 || {
		tail -n 30 "$log" >&2
		die "the build of ggml's BLAS module failed (LLAMA_BLAS=off builds without it)"
	}
fi

say "install: $dir"
out="$tmp/out"
mkdir -p "$out/lib" "$out/bin"
cp -P "$tmp/build/bin/"*.so* "$out/lib/"
for lib in libllama.so libggml.so libggml-base.so; do
	[[ -e $out/lib/$lib ]] || die "the build made no $lib"
done
compgen -G "$out/lib/libggml-cpu*.so" >/dev/null || die "the build made no CPU backend (libggml-cpu*.so)"
if [[ $blas == openblas ]]; then
	mkdir -p "$out/lib/blas"
	cp "$tmp/blas/bin/libggml-blas.so" "$out/lib/blas/"
fi
[[ $flavour != cuda || -e $out/lib/libggml-cuda.so ]] || die "the build made no libggml-cuda.so"
if ((tools)); then
	for t in "${tool_targets[@]}"; do cp "$tmp/build/bin/$t" "$out/bin/"; done
	# ggml looks for loadable backends beside the executable: point the
	# tools at lib/'s.
	for m in "$out"/lib/libggml-cpu-*.so "$out"/lib/libggml-cuda.so; do
		if [[ -e $m ]]; then ln -s "../lib/${m##*/}" "$out/bin/${m##*/}"; fi
	done
fi

json_list() {
	local sep="" s
	printf '['
	for s in "$@"; do
		s=${s//\\/\\\\}
		printf '%s"%s"' "$sep" "${s//\"/\\\"}"
		sep=", "
	done
	printf ']'
}
built=()
((tools)) && built=("${tool_targets[@]}")
cat >"$out/lib/genq-engine.json" <<EOF
{
  "tag": "$LLAMA_TAG",
  "commit": "$LLAMA_COMMIT",
  "flavour": "$flavour",
  "cmake_flags": $(json_list "${flags[@]}"),
  "tools": $(json_list "${built[@]}"),
  "blas": "$blas",
  "patches": $(json_list "${patches[@]##*/}"),
  "id": "$id",
  "built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "build_seconds": $((SECONDS - started))
}
EOF

# Swap the new directory in; the old one (stale flags, no tools) goes.
old=""
if [[ -e $dir ]]; then
	old="$root/.tmp/old-$key.$$"
	mv "$dir" "$old"
fi
mv "$out" "$dir"
[[ -n $old ]] && rm -rf "$old"
say "done: $key in $(elapsed)"
echo "$dir"
exit 0
}
