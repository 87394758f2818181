#!/usr/bin/env bash
# nats-secrets.sh: writes .genq/nats.env, the NATS passwords of genq's roles
# for docker compose, with random values, once. The file is git-ignored and
# readable by its owner only. Compose reads it for nats-server (env_file)
# and, through --env-file, for the api and the workers:
#
#   scripts/nats-secrets.sh
#   docker compose --env-file .genq/nats.env --profile cpu up --build
#
# A batch producer connects as genq-batch with NATS_INBOX_PREFIX=_INBOX_batch
# and the password GENQ_NATS_BATCH_PASSWORD from the same file.
set -euo pipefail
cd "$(dirname "$0")/.."
f=.genq/nats.env
if [[ -s $f ]]; then
	echo "$f exists; keeping it" >&2
	exit 0
fi
mkdir -p .genq
umask 077
{
	for role in API WORKER BATCH; do
		printf 'GENQ_NATS_%s_PASSWORD=%s\n' "$role" "$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
	done
} > "$f"
echo "wrote $f" >&2
