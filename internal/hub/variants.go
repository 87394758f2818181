package hub

import "github.com/genq/genq/internal/genq"

// Preset is a variant's default model on the hub.
type Preset = genq.HubModel

// VariantPreset is the default repository and patterns of a variant, from
// genq's table of variants.
func VariantPreset(v genq.Variant) (Preset, bool) {
	p := v.Spec().Hub
	return p, p.Repo != ""
}
