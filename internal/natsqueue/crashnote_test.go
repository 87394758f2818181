package natsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestNoteCrashes: a dead worker's supervisor writes its crash note into
// the run record of each job it held, keeping what the record says for the
// poison rule, and replacing an earlier job's record under the same id.
func TestNoteCrashes(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dial()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	note := CrashNote{Delivery: 2, Worker: "w-1", Cause: "SIGILL (illegal instruction)", Where: "in C code", Running: true, At: at}
	for i, tc := range []struct {
		name   string
		before *RunRecord // nil: none
		want   RunRecord
	}{
		{"no record yet", nil, RunRecord{Seq: 41, Crash: &note}},
		{"a record of the job", &RunRecord{Seq: 41, Failures: 1, LastFailure: 1, AloneAt: 2},
			RunRecord{Seq: 41, Failures: 1, LastFailure: 1, AloneAt: 2, Crash: &note}},
		{"an earlier job's record under its id", &RunRecord{Seq: 3, Failures: 2, AloneCrashes: 1},
			RunRecord{Seq: 41, Crash: &note}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			kv, err := c.attemptsKV(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("job-%d", i)
			if tc.before != nil {
				b, _ := json.Marshal(tc.before)
				if _, err := kv.Put(ctx, id, b); err != nil {
					t.Fatal(err)
				}
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			if err := NoteCrashes(ctx, ConnectOptions{URL: s.ns.ClientURL()}, log, []JobCrash{{JobID: id, Seq: 41, Note: note}}); err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var got RunRecord
			if err := json.Unmarshal(e.Value(), &got); err != nil {
				t.Fatal(err)
			}
			gotNote, wantNote := got.Crash, tc.want.Crash
			got.Crash, tc.want.Crash = nil, nil
			if got != tc.want || gotNote == nil || !gotNote.At.Equal(wantNote.At) || gotNote.Cause != wantNote.Cause ||
				gotNote.Worker != wantNote.Worker || gotNote.Delivery != wantNote.Delivery || !gotNote.Running {
				t.Errorf("record %+v with note %+v; want %+v with %+v", got, gotNote, tc.want, wantNote)
			}
		})
	}
}

func TestCrashNoteString(t *testing.T) {
	for _, tc := range []struct {
		note CrashNote
		want string
	}{
		{CrashNote{Delivery: 2, Worker: "w-1", Cause: "SIGILL (illegal instruction)", Where: "in C code called from llama.Decode, raised by the CPU", Running: true},
			"worker w-1 died of SIGILL (illegal instruction) in C code called from llama.Decode, raised by the CPU, while running delivery 2"},
		{CrashNote{Delivery: 1, Worker: "w-2", Cause: "SIGKILL (killed)"},
			"worker w-2 died of SIGKILL (killed) while delivery 1 waited to run"},
	} {
		if got := tc.note.String(); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.note, got, tc.want)
		}
	}
}
