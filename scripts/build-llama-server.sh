#!/usr/bin/env bash
# build-llama-server.sh [DIR]
#
# Builds llama.cpp's llama-server (and llama-batched-bench), the peer that
# make bench's multi-turn step measures genq against, from the llama.cpp
# sources the npm package node-llama-cpp ships as a git bundle. It builds
# into DIR (default: $LLAMA_CPP_DIR, or ~/.cache/genq/llama.cpp), outside
# the repository, and does nothing when the binary is already there. Needs
# npm, git, CMake and a C++ compiler; on two cores it takes about 15 min.
#
# Then: LLAMA_SERVER=DIR/build/bin/llama-server make bench
set -euo pipefail

dir="${1:-${LLAMA_CPP_DIR:-$HOME/.cache/genq/llama.cpp}}"
bin="$dir/build/bin/llama-server"
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
for tool in npm git cmake; do
	command -v "$tool" >/dev/null || { echo "build-llama-server.sh: $tool is needed" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent node-llama-cpp >/dev/null && tar xzf node-llama-cpp-*.tgz)
bundle="$work/package/llama/gitRelease.bundle"
[[ -s "$bundle" ]] || { echo "build-llama-server.sh: the package holds no llama.cpp bundle" >&2; exit 1; }
mkdir -p "$(dirname "$dir")"
git clone --quiet "$bundle" "$dir"
cd "$dir"
cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
nice cmake --build build -j"$(nproc)" --target llama-server llama-batched-bench >/dev/null
echo "$bin"
