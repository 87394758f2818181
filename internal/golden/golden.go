// Package golden holds the protocol's messages, in tests, to golden files:
// what a value marshals to, byte for byte, and what the file reads back as.
package golden

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Check compares got, the bytes a message marshalled to, with
// testdata/<name>.json, which update writes from got first (a test's
// -update flag), and reads the file back into a value of back's type,
// which must equal back.
func Check(t testing.TB, name string, got []byte, back any, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	if update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\ngot  %s\nwant %s", path, got, want)
	}
	read := reflect.New(reflect.TypeOf(back))
	if err := json.Unmarshal(want, read.Interface()); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !reflect.DeepEqual(read.Elem().Interface(), back) {
		t.Errorf("%s reads back as\n%+v\nwant\n%+v", path, read.Elem().Interface(), back)
	}
}
