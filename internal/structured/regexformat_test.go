package structured

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

const regexFormatSchema = `{"type":"string","format":"regex"}`

// compileStrictRegex compiles regexFormatSchema as a strict schema, the
// mode that enforces the subset.
func compileStrictRegex(t *testing.T) *grammar.Grammar {
	t.Helper()
	g, err := CompileWith([]byte(regexFormatSchema), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRegexFormat checks a strict schema's format "regex" on expressions
// of each kind
// the subset takes, and on invalid ones (each of which TestRegexFormatIsECMAScript
// confirms ECMAScript refuses) and valid ones beyond the subset.
func TestRegexFormat(t *testing.T) {
	g := compileStrictRegex(t)
	checkTexts(t, g, quoteAll(regexFormatTaken), quoteAll(append(regexFormatInvalid, regexFormatBeyond...)))
}

// regexFormatTaken are valid expressions the subset takes.
var regexFormatTaken = []string{
	``, `([abc])+\s+$`, `^[a-z0-9_-]{3,16}$`, `^\d{4}-\d{2}-\d{2}$`, `a|b|`, `(?:x)*?`, `(?=a)b(?!c)`,
	`(?<=a)b(?<!c)`, `[^\]\\]`, `[-a-z]`, `[a-z-]`, `[-]`, `[]`, `[^]`, `\p{Lu}+\P{N}`, `\u00e9\x41\cJ`,
	`x{2,10}`, `x{9,9}`, `x{10,99}`, `x{19,20}`, `x{123,1000}`, `x{0}`, `x{5,}`, `\/\.\*`, `(((a)))`, `[(){}*+?.$^|]`,
	`\bword\B`, `é+`, `[\d\w\s-]`, `[\b]`,
}

// regexFormatInvalid are invalid ECMA-262 expressions, with or without
// the u flag.
var regexFormatInvalid = []string{
	`^(abc]`, `(`, `)`, `[a`, `a**`, `a{2,1}`, `a{10,9}`, `[z-a]`, `[9-0]`, `?a`, `+`, `\`, `a\`,
	`(?<a>x)(?<a>y)`, `(?x)`, `^*`, `\b+`, `(?<=a)*`, `x{99,10}`, `a{1000,999}`, `[\w-a]`, `\u{110000}`,
}

// regexFormatBeyond are valid expressions the subset refuses: they need
// a count, a name or a depth the grammar does not hold.
var regexFormatBeyond = []string{
	`(a)\1`, `(?<n>a)\k<n>`, `x{01,2}`, `x{100,200}`, `x{12,15}`, `((((a))))`, `[\u0041-\u005a]`, `\0`,
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		out[i] = strings.TrimSuffix(b.String(), "\n")
	}
	return out
}

// TestRegexFormatIsECMAScript checks the subset against ECMAScript itself
// (node): every expression random walks write through the format's
// grammar compiles both with the u flag and without it, and every one of
// regexFormatInvalid fails with the u flag.
func TestRegexFormatIsECMAScript(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("GENQ_REQUIRE_AJV") == "1" {
			t.Fatal("node is missing")
		}
		t.Skip("node is missing")
	}
	g := compileStrictRegex(t)
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	var walked []string
	for i := range 400 {
		out, ok := walk(t, g, v, toks, eos, rand.New(rand.NewPCG(uint64(i), 52)), 400, nil)
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		walked = append(walked, s)
	}
	if len(walked) < 100 {
		t.Fatalf("only %d walks ended", len(walked))
	}
	verdicts := ecmaScriptRegexps(t, append(walked, regexFormatInvalid...))
	for i, s := range walked {
		if v := verdicts[i]; !v[0] || !v[1] {
			t.Errorf("%q is taken as the format regex; ECMAScript compiles it: without u %v, with u %v", s, v[0], v[1])
		}
	}
	for i, s := range regexFormatInvalid {
		if verdicts[len(walked)+i][1] {
			t.Errorf("%q, listed as invalid, compiles with the u flag", s)
		}
	}
}

// ecmaScriptRegexps says, for each expression, whether node's RegExp
// compiles it without and with the u flag.
func ecmaScriptRegexps(t *testing.T, exprs []string) [][2]bool {
	t.Helper()
	const script = `let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
  const ok = (p, f) => { try { new RegExp(p, f); return true } catch { return false } };
  console.log(JSON.stringify(JSON.parse(s).map(p => [ok(p, ""), ok(p, "u")])));
});`
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var verdicts [][2]bool
	if err := json.Unmarshal(out, &verdicts); err != nil || len(verdicts) != len(exprs) {
		t.Fatalf("node answered %.200q (%v) for %s expressions", out, err, strconv.Itoa(len(exprs)))
	}
	return verdicts
}
