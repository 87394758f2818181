#!/bin/sh
# The worker image's entrypoint. An image built with MODEL_SOURCE=none has an
# empty /models: the model is downloaded at start, with the hub token from
# HF_TOKEN (genqctl deploy fills it from its Secret). Otherwise it only
# starts the worker.
set -eu
dir="${MODEL_DIR:-/models}"
if [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
	echo "worker-entrypoint: $dir is empty; downloading the model of variant ${VARIANT:-B}" >&2
	/opt/genq/bin/genqctl download --variant "${VARIANT:-B}" --dir "$dir" --progress lines
fi
exec /opt/genq/bin/worker "$@"
