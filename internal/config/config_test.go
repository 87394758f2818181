package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// TestConfigurationDoc: docs/configuration.md is what the declarations
// write. A setting added, removed or changed in the code without the file
// fails here, naming it.
func TestConfigurationDoc(t *testing.T) {
	want, err := Markdown()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, File))
	if err != nil {
		t.Fatalf("%v: write it with %s", err, Command)
	}
	got := string(b)
	if got == want {
		return
	}
	inCode, inFile := tableRows(want), tableRows(got)
	var msg []string
	for _, k := range sortedKeys(inCode) {
		if f, ok := inFile[k]; !ok {
			msg = append(msg, "  in the code, not in the file: "+k)
		} else if f != inCode[k] {
			msg = append(msg, "  changed: "+k+"\n    code: "+inCode[k]+"\n    file: "+f)
		}
	}
	for _, k := range sortedKeys(inFile) {
		if _, ok := inCode[k]; !ok {
			msg = append(msg, "  in the file, not in the code: "+k)
		}
	}
	if len(msg) == 0 {
		msg = append(msg, "  the settings agree; the text around them differs: "+firstDifference(got, want))
	}
	t.Fatalf("%s does not match the settings' declarations; run %s and commit it:\n%s", File, Command, strings.Join(msg, "\n"))
}

// tableRows are a reference's table lines, by section and first cells.
func tableRows(md string) map[string]string {
	rows := map[string]string{}
	section := ""
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| Variable ") && !strings.HasPrefix(line, "|---"):
			cells := strings.Split(line, " | ")
			key := strings.TrimPrefix(cells[0], "| ")
			if key == "" && len(cells) > 1 {
				key = cells[1]
			}
			rows[section+": "+key] = line
		}
	}
	return rows
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d: file %q, code %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("the file has %d lines, the code writes %d", len(al), len(bl))
}

// TestNoSettingIsGivenTwice: a variable read by two programs (api, worker,
// genqctl) is either owned by one and adopted by the others, so that only
// the owner declares it, or listed in PerProcess with the reason each
// reads its own.
func TestNoSettingIsGivenTwice(t *testing.T) {
	perProcess := map[string]bool{}
	for _, p := range PerProcess {
		for _, v := range p.Vars {
			perProcess[v] = true
		}
	}
	binaries := map[string][]string{}
	adopted := map[string]bool{}
	for _, d := range Declarations() {
		for _, s := range d.Set.Settings() {
			if s.Env == "" {
				continue
			}
			if !slices.Contains(binaries[s.Env], d.Binary) {
				binaries[s.Env] = append(binaries[s.Env], d.Binary)
			}
			if s.Adopted != "" {
				adopted[s.Env] = true
			}
		}
	}
	for env, bins := range binaries {
		switch {
		case len(bins) > 1 && adopted[env]:
			t.Errorf("%s is adopted from its owner, yet declared by %v", env, bins)
		case len(bins) > 1 && !perProcess[env]:
			t.Errorf("%s is read by %v: make one of them own it and the others adopt it (envflag.Set.Adopted), or list it in PerProcess with why each reads its own", env, bins)
		case len(bins) == 1 && perProcess[env]:
			t.Errorf("%s is listed in PerProcess, yet only %v reads it", env, bins)
		}
	}
	for v := range perProcess {
		if binaries[v] == nil {
			t.Errorf("PerProcess lists %s, which nothing declares", v)
		}
	}
}

// testOnly are variables code outside the tests reads for the tests alone
// (make test sets them), not settings of a process.
var testOnly = map[string]bool{"GENQ_REQUIRE_AJV": true, "GENQ_REQUIRE_OTELCOL": true, "OTELCOL": true}

// TestEveryVariableReadIsDeclared: the programs read no variable by name
// past the declarations, which the reference would then not list.
func TestEveryVariableReadIsDeclared(t *testing.T) {
	declared := variables(Declarations())
	read := regexp.MustCompile(`(?:[Gg]etenv|LookupEnv|lookup)\("([A-Z][A-Z0-9_]*)"\)`)
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range read.FindAllStringSubmatch(string(b), -1) {
				if !declared[m[1]] && !testOnly[m[1]] {
					t.Errorf("%s reads %s, which no process declares (internal/config/*config)", path, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
