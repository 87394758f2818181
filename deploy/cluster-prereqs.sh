#!/usr/bin/env bash
# cluster-prereqs.sh: installs what genq needs in a Kubernetes cluster, into
# the current kube context, with Helm: the NVIDIA device plugin (with GPU
# feature discovery, which labels nodes nvidia.com/gpu.product), KEDA, and
# NATS with JetStream. Run once per cluster; rerunning upgrades in place.
#
# Pin chart versions for production: NVDP_VERSION, KEDA_VERSION and
# NATS_VERSION (empty: the repositories' latest).
set -euo pipefail
cd "$(dirname "$0")"

version() { [[ -n "${1:-}" ]] && echo "--version=$1" || true; }

helm repo add nvdp https://nvidia.github.io/k8s-device-plugin
helm repo add kedacore https://kedacore.github.io/charts
helm repo add nats https://nats-io.github.io/k8s/helm/charts/
helm repo update

# GPU nodes: the device plugin exposes nvidia.com/gpu; GFD labels the nodes.
# Managed node images that ship the plugin already (GKE) need only GFD.
helm upgrade --install nvdp nvdp/nvidia-device-plugin --namespace nvidia-device-plugin --create-namespace \
	--set gfd.enabled=true $(version "${NVDP_VERSION:-}")

helm upgrade --install keda kedacore/keda --namespace keda --create-namespace $(version "${KEDA_VERSION:-}")

# genq's NATS users' passwords (nats/values.yaml reads them from this
# Secret): random, created once, never printed. Through a file, not the
# command line, which other users of this machine can read.
kubectl create namespace nats --dry-run=client -o yaml | kubectl apply -f -
if ! kubectl -n nats get secret genq-nats-users >/dev/null 2>&1; then
	env_file=$(mktemp)
	trap 'rm -f "$env_file"' EXIT
	for role in API WORKER BATCH; do
		# A leading letter: nats-server parses the value as configuration.
		printf 'GENQ_NATS_%s_PASSWORD=g%s\n' "$role" "$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 31)"
	done >"$env_file"
	kubectl -n nats create secret generic genq-nats-users --from-env-file="$env_file" >/dev/null
	kubectl -n nats label secret genq-nats-users app.kubernetes.io/part-of=genq app.kubernetes.io/managed-by=genqctl >/dev/null
	echo "cluster-prereqs: created the Secret nats/genq-nats-users (NATS passwords of genq's roles)"
fi

helm upgrade --install nats nats/nats --namespace nats --create-namespace \
	--values nats/values.yaml $(version "${NATS_VERSION:-}")

kubectl -n nats rollout status statefulset/nats --timeout=10m
kubectl -n keda rollout status deployment/keda-operator --timeout=10m
echo "cluster-prereqs: NVIDIA device plugin, KEDA and NATS are installed; next: genqctl deploy"
