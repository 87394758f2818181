package natsqueue

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/genq/genq/internal/genq"
)

var update = flag.Bool("update", false, "write the golden files of testdata from the values of the tests")

// The protocol's messages that natsqueue's own types make, an error
// reply's body and a job's run record (docs/protocol.md, §3 and §5), held
// byte for byte to golden files in testdata and read back from them. The
// job message and the text result are genq's (internal/genq/testdata).
func TestProtocolGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
	}{
		{"error_reply", errorBody{Code: genq.Invalid, Error: "prompt is too long: 600 tokens"}},
		{"error_canceled", errorBody{Code: genq.Canceled, Error: "the job was cancelled by its caller"}},
		{"run_record", RunRecord{Seq: 1234, Failures: 1, LastFailure: 2, AloneCrashes: 1, AloneAt: 3, Finished: 4, HandedBack: 5}},
		{"run_record_first", RunRecord{Seq: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".json")
			if *update {
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
			read := reflect.New(reflect.TypeOf(tc.value))
			if err := json.Unmarshal(want, read.Interface()); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !reflect.DeepEqual(read.Elem().Interface(), tc.value) {
				t.Errorf("%s reads back as %+v, want %+v", path, read.Elem().Interface(), tc.value)
			}
		})
	}
}
