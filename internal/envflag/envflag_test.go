package envflag

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// TestEmptyVariable: an empty variable is the default for every setting
// but StringOff's, where it means off, when the Set can tell it from an
// unset one.
func TestEmptyVariable(t *testing.T) {
	env := map[string]string{"ADDR": "", "NAME": "", "N": ""}
	var addr, name string
	var n int
	fs := NewLookup("t", lookupOf(env), io.Discard)
	fs.StringOff(&addr, "addr", "ADDR", ":9090", "address (empty: off)")
	fs.String(&name, "name", "NAME", "x", "a name")
	fs.Int(&n, "n", "N", 3, "a number")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if addr != "" || name != "x" || n != 3 {
		t.Fatalf("ADDR= NAME= N= gave %q %q %d; want off, the defaults x and 3", addr, name, n)
	}

	// Unset, the default; set, the value; the flag over both.
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{}, nil, ":9090"},
		{map[string]string{"ADDR": ":1"}, nil, ":1"},
		{map[string]string{"ADDR": ""}, []string{"--addr", ":2"}, ":2"},
		{map[string]string{"ADDR": ":1"}, []string{"--addr="}, ""},
	} {
		fs := NewLookup("t", lookupOf(tt.env), io.Discard)
		fs.StringOff(&addr, "addr", "ADDR", ":9090", "address")
		if err := fs.Parse(tt.args); err != nil || addr != tt.want {
			t.Errorf("env %v, args %v: %q, %v; want %q", tt.env, tt.args, addr, err, tt.want)
		}
	}

	// Through getenv, empty cannot be told from unset: the default.
	fs = New("t", func(string) string { return "" }, io.Discard)
	fs.StringOff(&addr, "addr", "ADDR", ":9090", "address")
	if err := fs.Parse(nil); err != nil || addr != ":9090" {
		t.Fatalf("New: %q, %v; want the default", addr, err)
	}
}

// TestSettingsRecordTheDeclarations: what the reference is written from is
// what was declared, with the code's defaults whatever the environment.
func TestSettingsRecordTheDeclarations(t *testing.T) {
	env := map[string]string{"WAIT": "1m", "TOKEN": "s3cret", "HOSTS": "a, b,,c", "INSIDE": "true"}
	var wait time.Duration
	var token string
	var hosts []string
	var inside, dry bool
	fs := NewLookup("t", lookupOf(env), io.Discard)
	fs.Section("One")
	fs.Duration(&wait, "wait", "WAIT", 5*time.Second, "how long")
	fs.Secret(&token, "token", "TOKEN", "a token")
	fs.Section("Two")
	fs.List(&hosts, "host", "HOSTS", "a host, repeatable")
	fs.Bool(&inside, "", "INSIDE", false, "read from the environment alone")
	fs.Bool(&dry, "dry-run", "", false, "a flag alone")
	fs.Adopted("WAIT", "the others, from somewhere")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if wait != time.Minute || token != "s3cret" || !slices.Equal(hosts, []string{"a", "b", "c"}) || !inside || dry {
		t.Fatalf("values %s %q %q %v %v", wait, token, hosts, inside, dry)
	}
	want := []Setting{
		{Section: "One", Flag: "wait", Env: "WAIT", Default: "5s", Usage: "how long", Adopted: "the others, from somewhere"},
		{Section: "One", Flag: "token", Env: "TOKEN", Usage: "a token", Secret: true},
		{Section: "Two", Flag: "host", Env: "HOSTS", Usage: "a host, repeatable", List: true},
		{Section: "Two", Env: "INSIDE", Default: "false", Usage: "read from the environment alone"},
		{Section: "Two", Flag: "dry-run", Default: "false", Usage: "a flag alone"},
	}
	// Each names the file whose code declared it: this one.
	for i := range want {
		want[i].File = "internal/envflag/envflag_test.go"
	}
	if got := fs.Settings(); !slices.Equal(got, want) {
		t.Fatalf("settings\n%+v\nwant\n%+v", got, want)
	}
	if fs.Lookup("") != nil {
		t.Fatal("a setting without a flag defined one")
	}
	fs.FlagSet.Bool("stray", false, "defined past the binders")
	if got := fs.Undeclared(); !slices.Equal(got, []string{"stray"}) {
		t.Fatalf("undeclared %v", got)
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 720 * time.Hour: "720h", 2 * time.Minute: "2m", 90 * time.Second: "1m30s",
		25 * time.Millisecond: "25ms", 0: "0s", time.Hour + time.Minute: "1h1m", time.Hour + time.Second: "1h0m1s",
	} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestListFlagReplacesTheVariable: a list given on the command line
// replaces the variable's, item by item.
func TestListFlagReplacesTheVariable(t *testing.T) {
	var list []string
	fs := NewLookup("t", lookupOf(map[string]string{"L": "a,b"}), io.Discard)
	fs.List(&list, "l", "L", "items")
	if err := fs.Parse([]string{"-l", "c", "-l", "d"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(list, []string{"c", "d"}) {
		t.Fatalf("%q; want [c d]", list)
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "items (env L, comma-separated)") {
		t.Fatalf("help %q", help.String())
	}
}

// TestBadValuesAreReported: a variable that does not parse fails Parse,
// naming it.
func TestBadValuesAreReported(t *testing.T) {
	var n int
	var d time.Duration
	fs := NewLookup("t", lookupOf(map[string]string{"N": "x", "D": "5"}), io.Discard)
	fs.Int(&n, "n", "N", 1, "n")
	fs.Duration(&d, "", "D", time.Second, "d")
	err := fs.Parse(nil)
	if err == nil || !strings.Contains(err.Error(), `N="x": not an integer`) || !strings.Contains(err.Error(), `D="5": not a duration`) {
		t.Fatalf("err %v", err)
	}
}
