// Package deploy renders genq's Kubernetes manifests for one variant and
// applies them to a cluster: the api (Deployment, Service, HPA, PDB), the GPU
// worker (Deployment and KEDA ScaledObject) and the hub token's Secret.
// NATS itself comes from its official Helm chart (deploy/nats/values.yaml).
package deploy

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultGPULabel is the node label that GPU feature discovery (shipped with
// the NVIDIA device plugin's Helm chart) puts on every GPU node. It is cloud
// neutral, unlike instance-type labels, which name machines, not GPUs.
const DefaultGPULabel = "nvidia.com/gpu.product"

// GPUType is a GPU the deploy command accepts, with the values GPU feature
// discovery gives its nodes under DefaultGPULabel (the product name as
// nvidia-smi prints it, blanks replaced by dashes). A type may have several
// products: the A100 comes in 40 and 80 GB, SXM and PCIe.
type GPUType struct {
	Name     string
	Products []string
}

// gpuTypes is the documented list (docs/deploy.md has the same table).
var gpuTypes = []GPUType{
	{"a10g", []string{"NVIDIA-A10G"}},
	{"a100", []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-80GB-PCIe", "NVIDIA-A100-PCIE-40GB"}},
	{"h100", []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe", "NVIDIA-H100-NVL"}},
	{"l4", []string{"NVIDIA-L4"}},
	{"l40s", []string{"NVIDIA-L40S"}},
	{"t4", []string{"Tesla-T4"}},
}

// GPUTypes lists the accepted GPU types, in the documented order.
func GPUTypes() []GPUType { return slices.Clone(gpuTypes) }

// GPUTypeNames lists the accepted names, for messages.
func GPUTypeNames() []string {
	names := make([]string, len(gpuTypes))
	for i, g := range gpuTypes {
		names[i] = g.Name
	}
	return names
}

// LookupGPUType finds a type by name, ignoring case.
func LookupGPUType(name string) (GPUType, error) {
	for _, g := range gpuTypes {
		if strings.EqualFold(g.Name, strings.TrimSpace(name)) {
			return g, nil
		}
	}
	return GPUType{}, fmt.Errorf("unknown GPU type %q: want one of %s", name, strings.Join(GPUTypeNames(), ", "))
}

// GPUCounts are the GPUs per worker the deploy command accepts: the sizes
// GPU machines come in, so that a worker never strands part of a node.
var GPUCounts = []int{1, 2, 4, 8}

// CheckGPUCount reports a count that is not one of GPUCounts.
func CheckGPUCount(n int) error {
	if !slices.Contains(GPUCounts, n) {
		return fmt.Errorf("--gpus %d: want 1, 2, 4 or 8 (GPUs per worker)", n)
	}
	return nil
}
