package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The golden files hold the ids Hugging Face's tokenizers library (Rust)
// gives for a corpus of prompts, on synthetic tokenizers in the formats real
// SD3 exports ship. scripts/tokref/golden.mjs writes them; see its header.
type golden struct {
	Length int `json:"length"`
	PadID  int `json:"pad_id"`
	Cases  []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	} `json:"cases"`
}

func readGolden(t *testing.T, name string) golden {
	t.Helper()
	var g golden
	if err := readJSON(filepath.Join("testdata", "ref", "golden-"+name+".json"), &g); err != nil {
		t.Fatal(err)
	}
	// The acceptance bar: a comparison on a handful of strings proves little.
	if len(g.Cases) < 500 {
		t.Fatalf("golden %s has %d cases, want at least 500", name, len(g.Cases))
	}
	return g
}

// want is a case's ids padded back to the golden length (the files leave
// trailing padding out).
func (g golden) want(i int) []int64 {
	out := make([]int64, 0, g.Length)
	for _, id := range g.Cases[i].IDs {
		out = append(out, int64(id))
	}
	for len(out) < g.Length {
		out = append(out, int64(g.PadID))
	}
	return out
}

func compareGolden(t *testing.T, g golden, encode func(string, int) []int64) {
	t.Helper()
	diffs := 0
	for i, c := range g.Cases {
		got, want := encode(c.Text, g.Length), g.want(i)
		if slices.Equal(got, want) {
			continue
		}
		if diffs++; diffs <= 10 {
			t.Errorf("%q:\n got  %v\n want %v", c.Text, trimPad(got, g.PadID), trimPad(want, g.PadID))
		}
	}
	if diffs > 0 {
		t.Errorf("%d of %d strings differ from the reference", diffs, len(g.Cases))
	}
}

func trimPad(ids []int64, pad int) []int64 {
	for len(ids) > 0 && ids[len(ids)-1] == int64(pad) {
		ids = ids[:len(ids)-1]
	}
	return ids
}

// hideFile makes a copy of dir without the named file, so that the loader
// has to take its other path.
func hideFile(t *testing.T, dir, name string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == name {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dst, e.Name()), string(b))
	}
	return dst
}

func TestCLIPMatchesReference(t *testing.T) {
	for _, name := range []string{"clip-l", "clip-g"} {
		dir := filepath.Join("testdata", "ref", name)
		g := readGolden(t, name)
		// Exports carry tokenizer.json, vocab.json + merges.txt, or both.
		for _, tt := range []struct {
			files string
			dir   string
		}{
			{"tokenizer.json", dir},
			{"vocab.json and merges.txt", hideFile(t, dir, "tokenizer.json")},
		} {
			t.Run(name+" from "+tt.files, func(t *testing.T) {
				c, err := LoadCLIP(tt.dir)
				if err != nil {
					t.Fatal(err)
				}
				if c.PadID() != g.PadID {
					t.Errorf("pad id %d, reference pads with %d", c.PadID(), g.PadID)
				}
				compareGolden(t, g, c.Encode)
			})
		}
	}
}

func TestT5MatchesReference(t *testing.T) {
	dir := filepath.Join("testdata", "ref", "t5")
	g := readGolden(t, "t5")
	for _, tt := range []struct {
		files string
		dir   string
	}{
		{"tokenizer.json", hideFile(t, dir, "spiece.model")},
		{"spiece.model", hideFile(t, dir, "tokenizer.json")},
	} {
		t.Run("from "+tt.files, func(t *testing.T) {
			tok, err := LoadT5(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, g, tok.Encode)
		})
	}
}

// The golden files must be what the reference wrote: a case whose ids were
// edited by hand would make the comparison prove nothing. Every case ends in
// its end token within the length, which the reference always writes.
func TestGoldenFilesAreWellFormed(t *testing.T) {
	for _, tt := range []struct {
		name     string
		startID  int // -1: no start token
		endToken string
		dir      string
	}{
		{"clip-l", 0, CLIPEnd, "clip-l"},
		{"clip-g", 0, CLIPEnd, "clip-g"},
		{"t5", -1, "</s>", "t5"},
	} {
		g := readGolden(t, tt.name)
		var doc struct {
			Added []struct {
				ID      int    `json:"id"`
				Content string `json:"content"`
			} `json:"added_tokens"`
		}
		if err := readJSON(filepath.Join("testdata", "ref", tt.dir, "tokenizer.json"), &doc); err != nil {
			t.Fatal(err)
		}
		end := -1
		for _, a := range doc.Added {
			if a.Content == tt.endToken {
				end = a.ID
			}
		}
		for i, c := range g.Cases {
			w := g.want(i)
			if len(c.IDs) > g.Length || !slices.Contains(w, int64(end)) {
				t.Errorf("%s case %d (%q): %v has no end token %d within %d", tt.name, i, c.Text, c.IDs, end, g.Length)
			}
		}
	}
}
