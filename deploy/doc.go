// Package deploy holds genq's deployment files: Kubernetes manifests
// rendered per variant (k8s/), the NATS Helm chart's values (nats/), the
// worker image's entrypoint (docker/) and the cluster's prerequisites
// script. Its tests check those and the files at the repository root
// (docker-compose.yml, Dockerfile.api, Dockerfile.worker). The Go code that
// renders and applies the manifests is internal/deploy.
package deploy
