package natsqueue

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/golden"
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
			golden.Check(t, tc.name, got, tc.value, *update)
		})
	}
}
