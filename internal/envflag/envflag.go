// Package envflag binds command-line flags to environment variables: every
// setting has both, the flag wins, and --help names the variable. A Set
// also keeps what was declared on it (Settings), so that the configuration
// reference, docs/configuration.md, is written from the same declarations
// the processes parse (internal/config).
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Set is a flag.FlagSet whose defaults come from the environment.
type Set struct {
	*flag.FlagSet
	lookup   func(string) (string, bool)
	errs     []error
	section  string
	settings []Setting
}

// Setting is one declared setting, as the configuration reference lists it.
type Setting struct {
	// Section is the topic it is listed under (see Set.Section).
	Section string
	// Flag is the flag's name without dashes; empty for a setting read
	// from the environment alone.
	Flag string
	// Env is the environment variable; empty for a flag alone.
	Env string
	// Default is the default as the code declares it, before the
	// environment; empty for secrets.
	Default string
	Usage   string
	Secret  bool
	// List is a comma-separated list in the environment, a repeatable flag.
	List bool
	// Adopted says which other processes take this setting's value from
	// the one that declares it, and how (see Set.Adopted).
	Adopted string
	// File is the source file that declares it, from the module's root
	// (internal/textgen/config.go): the reference links it.
	File string
}

// New returns a Set that reads the environment through getenv and writes
// usage to out. getenv cannot tell an empty variable from an unset one, so
// both mean the default everywhere; NewLookup can.
func New(name string, getenv func(string) string, out io.Writer) *Set {
	return NewLookup(name, func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}, out)
}

// NewLookup returns a Set that reads the environment through lookup, as
// os.LookupEnv does: a variable set to the empty string is told apart from
// an unset one, which StringOff settings need.
func NewLookup(name string, lookup func(string) (string, bool), out io.Writer) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &Set{FlagSet: fs, lookup: lookup}
}

// Parse parses args, after reporting any environment value that did not parse.
func (s *Set) Parse(args []string) error {
	if err := errors.Join(s.errs...); err != nil {
		return err
	}
	return s.FlagSet.Parse(args)
}

// Section makes the settings declared next part of the topic title in the
// configuration reference, until the next call.
func (s *Set) Section(title string) { s.section = title }

// Adopted notes, for the configuration reference, that other processes
// never read env themselves but take its value from the process that
// declares it; how says who and how, as a clause ("the api takes it from
// the workers' heartbeats"). env must be declared on s already.
func (s *Set) Adopted(env, how string) {
	for i := range s.settings {
		if s.settings[i].Env == env {
			s.settings[i].Adopted = how
			return
		}
	}
	panic("envflag: Adopted(" + env + ") before its declaration")
}

// Settings returns what was declared on s, in order.
func (s *Set) Settings() []Setting { return append([]Setting(nil), s.settings...) }

// Undeclared lists the flags defined on the FlagSet itself, past the
// binders: the configuration reference would not know them.
func (s *Set) Undeclared() []string {
	declared := map[string]bool{}
	for _, st := range s.settings {
		declared[st.Flag] = true
	}
	var out []string
	s.VisitAll(func(f *flag.Flag) {
		if !declared[f.Name] {
			out = append(out, f.Name)
		}
	})
	return out
}

func (s *Set) record(name, env, def, usage string, secret, list bool) {
	if name == "" && env == "" {
		panic("envflag: a setting needs a flag or a variable")
	}
	s.settings = append(s.settings, Setting{Section: s.section, Flag: name, Env: env, Default: def, Usage: usage, Secret: secret, List: list, File: declaringFile()})
}

// declaringFile is the first file up the stack outside this package: the
// one whose RegisterFlags (or Register) declared the setting, from the
// module's root, whether the binary was built with -trimpath or not.
func declaringFile() string {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasSuffix(f.File, "/internal/envflag/envflag.go") {
			for _, root := range []string{"/internal/", "/cmd/", "/test/"} {
				if i := strings.LastIndex(f.File, root); i >= 0 {
					return f.File[i+1:]
				}
			}
			return f.File
		}
		if !more {
			return ""
		}
	}
}

// env returns env's value; empty counts as unset.
func (s *Set) env(env string) (string, bool) {
	if env == "" {
		return "", false
	}
	v, ok := s.lookup(env)
	return v, ok && v != ""
}

func label(env, usage string) string {
	if env == "" {
		return usage
	}
	return fmt.Sprintf("%s (env %s)", usage, env)
}

// Each binder below declares a flag and its variable; with name empty the
// setting has no flag and is read from the environment alone.

// String binds a string setting. An empty variable means the default.
func (s *Set) String(p *string, name, env, def, usage string) {
	s.record(name, env, def, usage, false, false)
	if v, ok := s.env(env); ok {
		def = v
	}
	s.stringVar(p, name, env, def, usage)
}

// StringOff binds a string setting that an empty value turns off: with the
// variable set to the empty string (VAR=), the value is "" where String
// would keep the default. A Set made by New cannot tell, and keeps it.
func (s *Set) StringOff(p *string, name, env, def, usage string) {
	s.record(name, env, def, usage, false, false)
	if env != "" {
		if v, ok := s.lookup(env); ok {
			def = v
		}
	}
	s.stringVar(p, name, env, def, usage)
}

func (s *Set) stringVar(p *string, name, env, def, usage string) {
	if name == "" {
		*p = def
		return
	}
	s.StringVar(p, name, def, label(env, usage))
}

// Secret binds a string setting whose value --help never shows.
func (s *Set) Secret(p *string, name, env, usage string) {
	s.record(name, env, "", usage, true, false)
	v, _ := s.env(env)
	if name != "" {
		s.StringVar(p, name, "", label(env, usage))
	}
	*p = v
}

// Int binds an integer setting.
func (s *Set) Int(p *int, name, env string, def int, usage string) {
	bind(s, p, name, env, def, strconv.Itoa(def), usage, "an integer", strconv.Atoi, s.IntVar)
}

// Int64 binds a 64-bit integer setting.
func (s *Set) Int64(p *int64, name, env string, def int64, usage string) {
	parse := func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }
	bind(s, p, name, env, def, strconv.FormatInt(def, 10), usage, "an integer", parse, s.Int64Var)
}

// Float64 binds a floating-point setting.
func (s *Set) Float64(p *float64, name, env string, def float64, usage string) {
	parse := func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }
	bind(s, p, name, env, def, strconv.FormatFloat(def, 'g', -1, 64), usage, "a number", parse, s.Float64Var)
}

// Bool binds a boolean setting.
func (s *Set) Bool(p *bool, name, env string, def bool, usage string) {
	bind(s, p, name, env, def, strconv.FormatBool(def), usage, "a boolean", strconv.ParseBool, s.BoolVar)
}

// Duration binds a duration setting, written like 30s or 5m.
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	bind(s, p, name, env, def, durationText(def), usage, "a duration (like 30s or 5m)", time.ParseDuration, s.DurationVar)
}

// bind is every typed setting's rule: the variable, where set, takes the
// default's place, and a value that does not parse is an error naming
// what it must be; the flag, where it has a name, takes both's place.
func bind[T any](s *Set, p *T, name, env string, def T, defText, usage, what string,
	parse func(string) (T, error), flagVar func(*T, string, T, string)) {
	s.record(name, env, defText, usage, false, false)
	if v, ok := s.env(env); ok {
		if x, err := parse(v); err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not %s", env, v, what))
		} else {
			def = x
		}
	}
	if name == "" {
		*p = def
		return
	}
	flagVar(p, name, def, label(env, usage))
}

// durationText is d as one writes it: 1h and 2m, not 1h0m0s and 2m0s.
func durationText(d time.Duration) string {
	t := d.String()
	t, _ = strings.CutSuffix(t, "m0s")
	if t != d.String() {
		t += "m"
	}
	if u, ok := strings.CutSuffix(t, "h0m"); ok {
		t = u + "h"
	}
	return t
}

// List binds a list: comma-separated in the variable, one item per use of
// the repeatable flag. Given on the command line, the flag's items replace
// the variable's.
func (s *Set) List(p *[]string, name, env, usage string) {
	s.record(name, env, "", usage, false, true)
	*p = nil
	if v, ok := s.env(env); ok {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*p = append(*p, item)
			}
		}
	}
	if name == "" {
		return
	}
	u := usage
	if env != "" {
		u = fmt.Sprintf("%s (env %s, comma-separated)", usage, env)
	}
	s.Var(&listValue{list: p, fresh: true}, name, u)
}

type listValue struct {
	list  *[]string
	fresh bool // the environment's items have not been replaced yet
}

func (v *listValue) String() string {
	if v == nil || v.list == nil {
		return ""
	}
	return strings.Join(*v.list, ",")
}

func (v *listValue) Set(item string) error {
	if v.fresh {
		*v.list, v.fresh = nil, false
	}
	*v.list = append(*v.list, item)
	return nil
}
