package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEachSettingValidatedOnce: a setting's value is refused in one room,
// the one that declares and reads it. genq's refusals of a value lead with
// the setting's name ("IMAGE_BLAS %q: want auto, on or off"); the same
// lead in two packages is one rule written twice, whose words drift apart.
func TestEachSettingValidatedOnce(t *testing.T) {
	names := map[string]bool{}
	for _, d := range Declarations() {
		for _, s := range d.Set.Settings() {
			if s.Env != "" {
				names[s.Env] = true
			}
		}
	}
	where := map[string]map[string]bool{} // setting → packages refusing it
	fset := token.NewFileSet()
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if setting := refused(n, names); setting != "" {
					if where[setting] == nil {
						where[setting] = map[string]bool{}
					}
					where[setting][filepath.Dir(path)] = true
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(where) == 0 {
		t.Fatal("no refusal of a setting found: the scan is broken")
	}
	for setting, pkgs := range where {
		if len(pkgs) > 1 {
			var list []string
			for p := range pkgs {
				list = append(list, p)
			}
			t.Errorf("%s is refused in %d packages (%s): check it once, where it is declared", setting, len(pkgs), strings.Join(list, ", "))
		}
	}
}

// refused is the setting a call that makes an error refuses a value of
// (its message leads with the setting's name and a verb or a colon), or "".
func refused(n ast.Node, names map[string]bool) string {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Errorf" && sel.Sel.Name != "New") {
		return ""
	}
	for _, arg := range call.Args {
		lit, ok := arg.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		msg, err := strconv.Unquote(lit.Value)
		if err != nil {
			continue
		}
		name, rest, _ := strings.Cut(msg, " ")
		name = strings.TrimSuffix(name, ":")
		if names[name] && (strings.HasPrefix(rest, "%") || strings.HasSuffix(strings.Fields(msg)[0], ":")) {
			return name
		}
		return ""
	}
	return ""
}
