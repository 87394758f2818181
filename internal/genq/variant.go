// Package genq holds the domain words shared by every part of genq: the
// variants it serves, the jobs that travel on the queue, their results, and
// the one error type whose code decides what a caller is told.
package genq

import (
	"fmt"
	"strconv"
	"strings"
)

// Variant names one of the three deployments of the HTTP contract.
type Variant string

const (
	VariantA Variant = "A" // text, 70B-class instruct model, 4-bit
	VariantB Variant = "B" // text, 8B-class instruct model, 16-bit
	VariantC Variant = "C" // images, SD3-medium-class diffusion model, fp16
)

// Variants lists every variant, in order.
var Variants = []Variant{VariantA, VariantB, VariantC}

// ParseVariant accepts "A", "b", … and reports an invalid error otherwise.
func ParseVariant(s string) (Variant, error) {
	v := Variant(strings.ToUpper(strings.TrimSpace(s)))
	switch v {
	case VariantA, VariantB, VariantC:
		return v, nil
	}
	return "", Errorf(Invalid, "unknown variant %q: want A, B or C", s)
}

// Kind says what a variant produces.
func (v Variant) Kind() OutputKind {
	if v == VariantC {
		return OutputImage
	}
	return OutputText
}

func (v Variant) String() string { return string(v) }

// OutputKind is what a variant's jobs produce.
type OutputKind string

const (
	OutputText  OutputKind = "text"
	OutputImage OutputKind = "image"
)

// ContentType is the media type of a result of this kind.
func (k OutputKind) ContentType() string {
	if k == OutputImage {
		return "image/png"
	}
	return "application/json"
}

var _ fmt.Stringer = VariantA

// DefaultModelDir is where a variant's model lives: /models inside genq's
// images, which set GENQ_IN_CONTAINER=1, and models/<variant> elsewhere. An
// explicit variable rather than sniffing /.dockerenv: BuildKit builds,
// where the download runs, have no such file.
func DefaultModelDir(v Variant, getenv func(string) string) string {
	if in, _ := strconv.ParseBool(getenv("GENQ_IN_CONTAINER")); in {
		return "/models"
	}
	return "models/" + string(v)
}
