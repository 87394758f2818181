package hub

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// DefaultExcludes are skipped unless the caller says otherwise: pickled
// PyTorch weights, which run code when loaded and which genq never reads.
func DefaultExcludes() []string { return []string{"*.pt", "*.bin"} }

// Filter selects files by glob patterns, with the hub client's semantics
// (Python's fnmatch): '*' matches across '/', so "*.bin" also skips
// "sub/model.bin"; a pattern ending in '/' means everything under it.
type Filter struct {
	include []*regexp.Regexp
	exclude []*regexp.Regexp
}

// NewFilter compiles the patterns. No include pattern means every file.
func NewFilter(include, exclude []string) (*Filter, error) {
	f := &Filter{}
	var err error
	if f.include, err = compileGlobs(include); err != nil {
		return nil, err
	}
	if f.exclude, err = compileGlobs(exclude); err != nil {
		return nil, err
	}
	return f, nil
}

// Match reports whether name is selected: matched by an include pattern
// (or there are none) and by no exclude pattern.
func (f *Filter) Match(name string) bool {
	if len(f.include) > 0 && !anyMatch(f.include, name) {
		return false
	}
	return !anyMatch(f.exclude, name)
}

func anyMatch(res []*regexp.Regexp, name string) bool {
	for _, re := range res {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func compileGlobs(patterns []string) ([]*regexp.Regexp, error) {
	res := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := globRegexp(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
		res = append(res, re)
	}
	return res, nil
}

// globRegexp translates a glob with *, ?, [abc], [!abc] into an anchored
// regexp. path.Match would do, but its '*' stops at '/'.
func globRegexp(glob string) (*regexp.Regexp, error) {
	if glob == "" {
		return nil, fmt.Errorf("empty pattern")
	}
	if strings.HasSuffix(glob, "/") {
		glob += "*"
	}
	if _, err := path.Match(glob, ""); err != nil {
		return nil, err // reject malformed classes the same way path.Match does
	}
	var b strings.Builder
	b.WriteString(`^`)
	rs := []rune(glob)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := indexRune(rs[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := string(rs[i+1 : i+1+j])
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}

func indexRune(rs []rune, r rune) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}
