package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestKeys adds, lists and removes keys in a real nats-server's GENQ_KEYS:
// a made key is printed once, a key read from stdin never, and the list
// shows digests and limits, no key.
func TestKeys(t *testing.T) {
	ns := embeddedNATS(t)
	ctx := context.Background()
	keys := func(stdin string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		e := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut}
		err := run(ctx, append(append([]string{"keys"}, args[0], "--nats-url", ns.ClientURL()), args[1:]...), e)
		return out.String() + errOut.String(), err
	}
	for _, tt := range []struct {
		stdin   string
		args    []string
		want    []string // in the output
		notWant []string
		wantErr string
	}{
		{stdin: "sk-from-stdin\n", args: []string{"add", "--key-stdin", "tenant=a", "rpm=5", "models=m1,m2"}, want: []string{"tenant a"}, notWant: []string{"sk-from-stdin"}},
		{args: []string{"add", "tenant=b", "admin=true"}, want: []string{"sk-genq-", "tenant b"}},
		{args: []string{"add", "tenant=c", "rpm=lots"}, wantErr: `rpm: "lots"`},
		{args: []string{"list"}, want: []string{"DIGEST", "a   ", "rpm=5 models=m1,m2", "admin=true"}, notWant: []string{"sk-"}},
		{args: []string{"remove", "tenant=a"}, want: []string{"removed 1 key(s)"}},
		{args: []string{"remove", "tenant=a"}, wantErr: "no stored key matches tenant=a"},
		{args: []string{"remove", "abc"}, wantErr: "8 hex digits"},
		{args: []string{"list"}, want: []string{"b   "}, notWant: []string{"rpm=5"}},
	} {
		out, err := keys(tt.stdin, tt.args...)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output %q lacks %q", tt.args, out, w)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%v: output %q holds %q", tt.args, out, w)
			}
		}
	}
}
