package tenant

import (
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	const key = "sk-secret-Zq81"
	for _, tt := range []struct {
		line    string
		want    Tenant
		wantErr string // a part of the error; "" for none
	}{
		{line: key, want: Tenant{Name: PlainName(DigestOf(key))}},
		{line: key + " tenant=team-a", want: Tenant{Name: "team-a"}},
		{line: key + " tenant=b rpm=10 tpm=2000 tpd=90000 images_per_day=5 concurrency=2 weight=1.5 models=m1,m2 admin=true",
			want: Tenant{Name: "b", Admin: true, Limits: Limits{RPM: 10, TPM: 2000, TPD: 90000, ImagesPerDay: 5, Concurrency: 2, Weight: 1.5, Models: []string{"m1", "m2"}}}},
		{line: key + "   rpm=3\t", want: Tenant{Name: PlainName(DigestOf(key)), Limits: Limits{RPM: 3}}},
		{line: key + " rpm=0", wantErr: `rpm: "0" is not a whole number`},
		{line: key + " rpm=ten", wantErr: `rpm: "ten"`},
		{line: key + " tpd=-5", wantErr: "tpd:"},
		{line: key + " weight=0", wantErr: "weight:"},
		{line: key + " models=a,,b", wantErr: "models: an empty name"},
		{line: key + " tenant=a.b", wantErr: "tenant:"},
		{line: key + " admin=maybe", wantErr: "admin:"},
		{line: key + " burst=3", wantErr: `unknown field "burst"`},
		{line: key + " rpm", wantErr: `field "rpm": want name=value`},
		{line: "rpm=3", wantErr: "must start with the key"},
	} {
		k, err := ParseLine(tt.line)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want one with %q", tt.line, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), key) {
				t.Errorf("%q: the error %q holds the key", tt.line, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.line, err)
			continue
		}
		if k.Digest != DigestOf(key) {
			t.Errorf("%q: digest is not the key's", tt.line)
		}
		if got, want := strings.Join(k.Tenant.Models, ","), strings.Join(tt.want.Models, ","); got != want {
			t.Errorf("%q: models %q, want %q", tt.line, got, want)
		}
		k.Tenant.Models, tt.want.Models = nil, nil
		if k.Tenant.Name != tt.want.Name || k.Tenant.Admin != tt.want.Admin || k.Tenant.Limits.RPM != tt.want.RPM ||
			k.Tenant.TPM != tt.want.TPM || k.Tenant.TPD != tt.want.TPD || k.Tenant.ImagesPerDay != tt.want.ImagesPerDay ||
			k.Tenant.Concurrency != tt.want.Concurrency || k.Tenant.Weight != tt.want.Weight {
			t.Errorf("%q: %+v, want %+v", tt.line, k.Tenant, tt.want)
		}
	}
}

// TestParseKeysNamesTheLine: a bad line is named by its number in the
// file, and the error holds no key of any line.
func TestParseKeysNamesTheLine(t *testing.T) {
	file := "# keys\n\nsk-one tenant=a\nsk-two tenant=b rpm=x\n"
	_, err := ParseKeys("sk-zero", file, "keys.txt")
	if err == nil || !strings.Contains(err.Error(), "keys.txt line 4: rpm:") {
		t.Fatalf("error %v, want keys.txt line 4: rpm: …", err)
	}
	for _, k := range []string{"sk-zero", "sk-one", "sk-two"} {
		if strings.Contains(err.Error(), k) {
			t.Errorf("the error %q holds a key", err)
		}
	}
	keys, err := ParseKeys("sk-zero, sk-three", "sk-one tenant=a\n", "keys.txt")
	if err != nil || len(keys) != 3 {
		t.Fatalf("%d keys, %v; want 3", len(keys), err)
	}
}

func TestKeysLookup(t *testing.T) {
	keys := NewKeys([]Key{{Digest: DigestOf("k-a"), Tenant: Tenant{Name: "a"}}})
	if keys.Required() != true {
		t.Fatal("keys with a key are not required")
	}
	keys.Put(DigestOf("k-b"), Tenant{Name: "b", Limits: Limits{RPM: 1}})
	for _, tt := range []struct {
		token string
		want  string // tenant; "" for none
	}{{"k-a", "a"}, {"k-b", "b"}, {"k-", ""}, {"k-bb", ""}, {"", ""}} {
		got, ok := keys.Lookup(tt.token)
		if ok != (tt.want != "") || got.Name != tt.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tt.token, got.Name, ok, tt.want)
		}
	}
	keys.Delete(DigestOf("k-b"))
	if _, ok := keys.Lookup("k-b"); ok {
		t.Error("a deleted key still opens")
	}
	if open := NewKeys(nil); open.Required() {
		t.Error("no keys, yet required")
	}
}

func TestDecodeRecord(t *testing.T) {
	for _, tt := range []struct {
		json string
		ok   bool
	}{
		{`{"tenant":"a","rpm":10,"models":["m"],"admin":true}`, true},
		{`{"tenant":"a b"}`, false},
		{`{"tenant":"a","rpm":-1}`, false},
		{`{"tenant":"a","burst":1}`, false},
		{`{}`, false},
	} {
		_, err := DecodeRecord([]byte(tt.json))
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.json, err, tt.ok)
		}
	}
}
