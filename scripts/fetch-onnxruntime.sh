#!/usr/bin/env bash
# fetch-onnxruntime.sh DEST_DIR
#
# Puts the CPU build of ONNX Runtime (libonnxruntime.so.1) into DEST_DIR, taken
# from the npm package onnxruntime-node, which ships it prebuilt. It does
# nothing when the library is already there, so `make` can call it every time.
#
# The version is pinned to the C API version that github.com/yalue/onnxruntime_go
# (see go.mod) was built against: ORT_API_VERSION 24 = ONNX Runtime 1.24.x.
# To run on a GPU, point ONNXRUNTIME_LIB at a CUDA build of the same 1.24 line
# instead (the container does).
set -euo pipefail

ORT_NPM_VERSION="${ORT_NPM_VERSION:-1.24.3}"
dest="${1:?usage: $0 DEST_DIR}"
lib="$dest/libonnxruntime.so.1"

if [[ -s "$lib" ]]; then
	exit 0
fi

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) arch=x64 ;;
Linux/aarch64 | Linux/arm64) arch=arm64 ;;
*)
	echo "fetch-onnxruntime: no prebuilt library for $(uname -s)/$(uname -m) in onnxruntime-node" >&2
	exit 1
	;;
esac

command -v npm >/dev/null || {
	echo "fetch-onnxruntime: npm is needed to fetch onnxruntime-node@$ORT_NPM_VERSION" >&2
	exit 1
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "fetch-onnxruntime: fetching onnxruntime-node@$ORT_NPM_VERSION from npm" >&2
(cd "$tmp" && npm pack --silent "onnxruntime-node@$ORT_NPM_VERSION" >/dev/null)
tar -xzf "$tmp"/onnxruntime-node-*.tgz -C "$tmp" "package/bin/napi-v6/linux/$arch/libonnxruntime.so.1"

mkdir -p "$dest"
# Write under a temporary name and rename, so an interrupted run never leaves
# a truncated library that the "already there" check would accept.
cp "$tmp/package/bin/napi-v6/linux/$arch/libonnxruntime.so.1" "$lib.partial"
mv "$lib.partial" "$lib"
echo "fetch-onnxruntime: wrote $lib" >&2
