// Package envflag binds command-line flags to environment variables: every
// setting has both, the flag wins, and --help names the variable.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Set is a flag.FlagSet whose defaults come from the environment.
type Set struct {
	*flag.FlagSet
	getenv func(string) string
	errs   []error
}

// New returns a Set that reads the environment through getenv and writes
// usage to out.
func New(name string, getenv func(string) string, out io.Writer) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &Set{FlagSet: fs, getenv: getenv}
}

// Parse parses args, after reporting any environment value that did not parse.
func (s *Set) Parse(args []string) error {
	if err := errors.Join(s.errs...); err != nil {
		return err
	}
	return s.FlagSet.Parse(args)
}

func (s *Set) env(env string) (string, bool) {
	if env == "" {
		return "", false
	}
	v := s.getenv(env)
	return v, v != ""
}

func label(env, usage string) string {
	if env == "" {
		return usage
	}
	return fmt.Sprintf("%s (env %s)", usage, env)
}

// String binds a string setting.
func (s *Set) String(p *string, name, env, def, usage string) {
	if v, ok := s.env(env); ok {
		def = v
	}
	s.StringVar(p, name, def, label(env, usage))
}

// Secret binds a string setting whose value --help never shows.
func (s *Set) Secret(p *string, name, env, usage string) {
	v, _ := s.env(env)
	s.StringVar(p, name, "", label(env, usage))
	*p = v
}

// Int binds an integer setting.
func (s *Set) Int(p *int, name, env string, def int, usage string) {
	if v, ok := s.env(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	s.IntVar(p, name, def, label(env, usage))
}

// Int64 binds a 64-bit integer setting.
func (s *Set) Int64(p *int64, name, env string, def int64, usage string) {
	if v, ok := s.env(env); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not an integer", env, v))
		} else {
			def = n
		}
	}
	s.Int64Var(p, name, def, label(env, usage))
}

// Float64 binds a floating-point setting.
func (s *Set) Float64(p *float64, name, env string, def float64, usage string) {
	if v, ok := s.env(env); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a number", env, v))
		} else {
			def = f
		}
	}
	s.Float64Var(p, name, def, label(env, usage))
}

// Bool binds a boolean setting.
func (s *Set) Bool(p *bool, name, env string, def bool, usage string) {
	if v, ok := s.env(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a boolean", env, v))
		} else {
			def = b
		}
	}
	s.BoolVar(p, name, def, label(env, usage))
}

// Duration binds a duration setting, written like 30s or 5m.
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := s.env(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a duration (like 30s or 5m)", env, v))
		} else {
			def = d
		}
	}
	s.DurationVar(p, name, def, label(env, usage))
}
