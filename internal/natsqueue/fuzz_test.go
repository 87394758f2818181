package natsqueue

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
)

// FuzzDecodeJob feeds arbitrary job message bodies to the worker's decoder:
// it must never panic, and whatever it accepts must be a job it can run.
func FuzzDecodeJob(f *testing.F) {
	f.Add([]byte(`{"id":"0193f1c2-7d1e-7c3a-9a55-2f0e9c1d4b77","variant":"B","text":"hi","deadline":"2026-11-22T10:15:00Z","reply_to":"_INBOX.x.y"}`))
	f.Add([]byte(`{"id":"a","variant":"C","text":"fox","store":true}`))
	f.Add([]byte(`{"id":"../../etc","variant":"B","text":"x"}`))
	f.Add([]byte(`{"id":"a","variant":"B","text":"x","deadline":"yesterday"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := decodeJob(data, genq.VariantB)
		if err != nil {
			return
		}
		if genq.ValidateJobID(job.ID) != nil || job.Variant != genq.VariantB || job.Text == "" {
			t.Fatalf("accepted an unrunnable job %+v", job)
		}
	})
}

// FuzzDecodeErrorBody feeds arbitrary error reply bodies to the producer's
// decoder: it must always give an application error with a code, and never
// pass more than a bounded message on.
func FuzzDecodeErrorBody(f *testing.F) {
	f.Add([]byte(`{"code":"invalid","error":"prompt too long"}`))
	f.Add([]byte(`{"code":"","error":""}`))
	f.Add([]byte(`{"code":"internal"}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := decodeErrorBody(bytes.NewReader(data))
		if genq.ErrorCode(err) == "" {
			t.Fatalf("no code for %q", data)
		}
		if msg := genq.ErrorMessage(err); !utf8.ValidString(msg) || len(msg) > 1<<20 {
			t.Fatalf("message of %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
		}
	})
}
