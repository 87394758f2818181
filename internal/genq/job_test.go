package genq_test

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestJobValidate(t *testing.T) {
	ok := genq.Job{ID: "0193f1c2-7d1e_x", Variant: genq.VariantB, Text: "hi"}
	tests := []struct {
		name string
		edit func(*genq.Job)
		want string // "" when valid
	}{
		{"valid", func(*genq.Job) {}, ""},
		{"longest id", func(j *genq.Job) { j.ID = strings.Repeat("a", genq.MaxJobIDLen) }, ""},
		{"empty id", func(j *genq.Job) { j.ID = "" }, "job id"},
		{"id too long", func(j *genq.Job) { j.ID = strings.Repeat("a", genq.MaxJobIDLen+1) }, "job id"},
		{"id with a dot", func(j *genq.Job) { j.ID = "a.b" }, "job id"},
		{"id with a path", func(j *genq.Job) { j.ID = "../../etc" }, "job id"},
		{"id not ASCII", func(j *genq.Job) { j.ID = "é" }, "job id"},
		{"unknown variant", func(j *genq.Job) { j.Variant = "D" }, "unknown variant"},
		{"lower-case variant", func(j *genq.Job) { j.Variant = "b" }, "unknown variant"},
		{"no text", func(j *genq.Job) { j.Text = "" }, "text field is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := ok
			tt.edit(&j)
			err := j.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(genq.ErrorMessage(err), tt.want)):
				t.Fatalf("Validate() = %v, want a message with %q", err, tt.want)
			case tt.want != "" && genq.ErrorCode(err) != genq.Invalid:
				t.Fatalf("code = %s, want invalid", genq.ErrorCode(err))
			}
		})
	}
}
