package openai

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseBatchInput(t *testing.T) {
	const url = "/v1/chat/completions"
	good := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}`
	for _, tt := range []struct {
		name, input string
		lines       int
		errs        []string // code@line
	}{
		{"good lines and blank ones", good + "\n\n" + strings.Replace(good, `"a"`, `"b"`, 1) + "\n", 2, nil},
		{"no trailing newline", good, 1, nil},
		{"empty", "\n\n", 0, []string{"empty_file@0"}},
		{"not JSON", good + "\n{oops\n", 1, []string{"invalid_json_line@2"}},
		{"a repeated custom_id", good + "\n" + good + "\n", 1, []string{"duplicate_custom_id@2"}},
		{"another url", strings.Replace(good, url, "/v1/embeddings", 1), 0, []string{"mismatched_endpoint@1"}},
		{"GET", strings.Replace(good, "POST", "GET", 1), 0, []string{"invalid_method@1"}},
		{"no custom_id", strings.Replace(good, `"custom_id":"a",`, "", 1), 0, []string{"missing_custom_id@1"}},
		{"a body that is not an object", strings.Replace(good, `{"messages":[]}`, `"x"`, 1), 0, []string{"invalid_body@1"}},
		{"a body its route refuses", strings.Replace(good, `"a"`, `"refuse"`, 1), 0, []string{"invalid_request@1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lines, errs := ParseBatchInput([]byte(tt.input), url, func(body []byte) error {
				if strings.Contains(tt.input, "refuse") {
					return errors.New("no")
				}
				return nil
			})
			var got []string
			for _, e := range errs {
				line := 0
				if e.Line != nil {
					line = *e.Line
				}
				got = append(got, e.Code+"@"+strconv.Itoa(line))
			}
			if len(lines) != tt.lines || strings.Join(got, ",") != strings.Join(tt.errs, ",") {
				t.Fatalf("%d lines, errors %v; want %d, %v", len(lines), got, tt.lines, tt.errs)
			}
		})
	}
}
