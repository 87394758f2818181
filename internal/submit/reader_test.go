package submit

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name  string
		input string
		ids   []string // of the good lines; "*" for a derived id
		bad   []Result // their ids, lines and codes; errors checked by substring
		errIn []string
	}{
		{name: "ids given", input: `{"id":"a","text":"x"}` + "\n" + `{"id":"b","text":"y"}`, ids: []string{"a", "b"}},
		{name: "blank lines are skipped, not counted bad", input: "\n" + `{"id":"a","text":"x"}` + "\n\n", ids: []string{"a"}},
		{name: "an id is derived when missing", input: `{"text":"x"}`, ids: []string{"*"}},
		{
			name: "no text", input: `{"id":"a"}`,
			bad: []Result{{ID: "a", Line: 1, Code: genq.Invalid}}, errIn: []string{"text field is required"},
		},
		{
			name: "bad json is recorded under its line", input: `{"id":"ok","text":"x"}` + "\n" + `{"text":`,
			ids: []string{"ok"}, bad: []Result{{ID: "line-2", Line: 2, Code: genq.Invalid}}, errIn: []string{"unexpected end"},
		},
		{
			name: "an id the protocol refuses is recorded under its line", input: `{"id":"../x","text":"a"}`,
			bad: []Result{{ID: "line-1", Line: 1, Code: genq.Invalid}}, errIn: []string{"job id"},
		},
		{
			name: "a duplicate id", input: `{"id":"a","text":"x"}` + "\n" + `{"id":"a","text":"y"}`,
			ids: []string{"a"}, bad: []Result{{ID: "a", Line: 2, Code: genq.Invalid}}, errIn: []string{`id "a" already used on line 1`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, bad, err := Read(strings.NewReader(tt.input), genq.VariantB)
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) != len(tt.ids) {
				t.Fatalf("lines = %+v, want ids %v", lines, tt.ids)
			}
			for i, l := range lines {
				if tt.ids[i] == "*" {
					if genq.ValidateJobID(l.ID) != nil {
						t.Errorf("derived id %q is not a valid job id", l.ID)
					}
				} else if l.ID != tt.ids[i] {
					t.Errorf("line %d: id %q, want %q", i, l.ID, tt.ids[i])
				}
			}
			if len(bad) != len(tt.bad) {
				t.Fatalf("bad = %+v, want %+v", bad, tt.bad)
			}
			for i, b := range bad {
				w := tt.bad[i]
				if b.ID != w.ID || b.Line != w.Line || b.Code != w.Code || !strings.Contains(b.Error, tt.errIn[i]) {
					t.Errorf("bad[%d] = %+v, want %+v with an error holding %q", i, b, w, tt.errIn[i])
				}
			}
		})
	}
}

// TestReadDerivesStableIDs: a rerun of the same file gets the same ids, and
// the same text on another line or for another variant another id.
func TestReadDerivesStableIDs(t *testing.T) {
	input := `{"text":"x"}` + "\n" + `{"text":"x"}`
	first, _, _ := Read(strings.NewReader(input), genq.VariantB)
	again, _, _ := Read(strings.NewReader(input), genq.VariantB)
	other, _, _ := Read(strings.NewReader(input), genq.VariantA)
	if len(first) != 2 || first[0].ID != again[0].ID || first[1].ID != again[1].ID {
		t.Fatalf("ids differ between runs: %+v, %+v", first, again)
	}
	if first[0].ID == first[1].ID || first[0].ID == other[0].ID {
		t.Fatalf("ids collide: %+v, %+v", first, other)
	}
}
