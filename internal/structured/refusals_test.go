package structured

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// refusalPlace strips what differs between two refusals of one cause: the
// JSON pointer of the place, numbers, and quoted property names after the
// first quoted word (the keyword the message names).
var refusalPlace = regexp.MustCompile(`(#|/)[^ :,;)]*|\d+|"[^"]*"`)

// refusalReason groups a refusal by its keyword and the rest of its
// message with places and numbers left out.
func refusalReason(err error) string {
	kw := refusedKeyword(err)
	if kw == "$ref to another document" || kw == "over the state limit" || kw == "unsatisfiable" {
		return kw
	}
	msg := refusalPlace.ReplaceAllString(err.Error(), "…")
	if len(msg) > 160 {
		msg = msg[:160]
	}
	return kw + " | " + msg
}

// TestRefusalTally compiles the corpus TestRealWorldSchemas reads and logs
// the 15 most frequent causes of refusal with their counts, so that work
// on coverage goes where the refusals are. It fails only where a compile
// panics.
func TestRefusalTally(t *testing.T) {
	dir := os.Getenv("GENQ_SCHEMA_CORPUS")
	if dir == "" {
		t.Skip("GENQ_SCHEMA_CORPUS is unset (scripts/fetch-schema-corpus.sh DIR)")
	}
	reasons := map[string]int{}
	examples := map[string]string{}
	schemas := realWorldSchemas(t, dir)
	refused := 0
	for _, s := range schemas {
		if _, err := Compile(s.schema); err != nil {
			refused++
			r := refusalReason(err)
			reasons[r]++
			if examples[r] == "" {
				examples[r] = s.source + "/" + s.name + ": " + err.Error()
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(reasons), func(a, b string) int {
		if reasons[a] != reasons[b] {
			return reasons[b] - reasons[a]
		}
		return strings.Compare(a, b)
	})
	var s strings.Builder
	fmt.Fprintf(&s, "%d schemas, %d refused, %d causes\n", len(schemas), refused, len(keys))
	for _, k := range keys[:min(15, len(keys))] {
		fmt.Fprintf(&s, "%5d  %s\n       e.g. %.400s\n", reasons[k], k, examples[k])
	}
	t.Log("\n" + s.String())
}
