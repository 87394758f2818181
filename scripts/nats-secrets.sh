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
f=${GENQ_NATS_ENV:-.genq/nats.env}
if [[ -s $f ]]; then
	echo "$f exists; keeping it" >&2
	exit 0
fi
mkdir -p "$(dirname "$f")"
umask 077
# 32 letters and digits, the first a letter: nats-server parses a variable it
# substitutes into its configuration as a value, and one that starts with a
# digit is read as a number and refused (internal/deploy's NewSecretValue
# follows the same rule).
password() {
	printf '%s%s' "$(LC_ALL=C tr -dc 'A-Za-z' </dev/urandom | head -c 1)" "$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 31)"
}
{
	for role in API WORKER BATCH; do
		printf 'GENQ_NATS_%s_PASSWORD=%s\n' "$role" "$(password)"
	done
} > "$f"
echo "wrote $f" >&2
