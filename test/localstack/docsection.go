package localstack

import (
	"fmt"
	"os"
	"strings"
)

// ReplaceSection rewrites the text between the begin and end markers of
// the Markdown file at path, keeping the hand-written text around it: the
// generated figures of `make chaos` and `make bench` live in such sections.
func ReplaceSection(path, begin, end, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, begin, end)
	}
	return os.WriteFile(path, []byte(s[:i]+begin+"\n"+body+end+s[j+len(end):]), 0o644)
}
