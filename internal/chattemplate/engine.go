package chattemplate

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// What ardanlabs/jinja v1.8.0 (the newest this Go takes) lacks, and how
// genq works around it without changing the engine.

// tojson(indent=N): v1.8.0 indents through encoding/json, which sorts an
// object's keys and escapes <, > and &; Llama 3.1's template writes each
// tool's definition so, and the model reads the keys in the client's order
// and the characters as they are (later versions of the engine keep them).
// A filter cannot be replaced in v1.8.0 (filters are looked up among the
// engine's own), so the source's `name | tojson(indent=N)`, the form real
// templates use, becomes a call of a function genq passes in:
// tojsonIndentFunc(name, N). A filter applied to anything but a (dotted)
// name is left to the engine.
var tojsonIndentRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\|\s*tojson\(\s*indent\s*=\s*(\d+)\s*\)`)

const tojsonIndentFunc = "genq_tojson_indent"

// rewrite makes the source changes genq needs: tojson(indent=N) above, and
// the two that llama.cpp itself makes to templates its engine would refuse
// (common_chat_templates_init): GPT-OSS's check that a message holds no
// channel tags, and Mistral's refusal of an assistant message with neither
// content nor calls.
func rewrite(src string) string {
	src = tojsonIndentRE.ReplaceAllString(src, tojsonIndentFunc+"($1, $2)")
	if strings.Contains(src, "<|channel|>") && strings.Contains(src, "in message.content or") {
		src = strings.ReplaceAll(src,
			`{%- if "<|channel|>analysis<|message|>" in message.content or "<|channel|>final<|message|>" in message.content %}`,
			"{%- if false %}")
	}
	if strings.Contains(src, "[TOOL_CALLS]") && strings.Contains(src, "if (message['content'] is none or") {
		src = strings.ReplaceAll(src,
			"{%- if (message['content'] is none or message['content'] == '' or message['content']|length == 0) and "+
				"(message['tool_calls'] is not defined or message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
			"{%- if false %}")
	}
	return src
}

// tojsonIndent is tojson(value, indent): Python's json.dumps(indent=N,
// ensure_ascii=False), as llama.cpp's engine writes it: keys in order,
// items on lines of their own indented by N per level, "," between items
// and ": " after keys, strings escaped as JSON needs and no more.
func tojsonIndent(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 2 || !args[1].IsInt() {
		return jinja.Undefined(), fmt.Errorf("tojson(indent=N): want a value and an indent")
	}
	var b strings.Builder
	if err := writeJSON(&b, args[0], int(args[1].AsInt()), 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

func writeJSON(b *strings.Builder, v jinja.Value, indent, level int) error {
	newline := func(l int) {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(" ", indent*l))
	}
	switch {
	case v.IsNone() || v.IsUndefined():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("tojson: cannot write %v", f)
		}
		b.WriteString(strconv.FormatFloat(f, 'g', 6, 64)) // C++'s ostream, as llama.cpp's engine
	case v.IsString():
		writeJSONString(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(level + 1)
			if err := writeJSON(b, it, indent, level+1); err != nil {
				return err
			}
		}
		if len(items) > 0 {
			newline(level)
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		b.WriteByte('{')
		for i, k := range d.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(level + 1)
			writeJSONString(b, k)
			b.WriteString(": ")
			if err := writeJSON(b, d.Data[k], indent, level+1); err != nil {
				return err
			}
		}
		if len(d.Keys) > 0 {
			newline(level)
		}
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
	return nil
}

// writeJSONString writes s quoted, escaping what llama.cpp's engine
// escapes: the quote, the backslash and control characters.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// strftime formats t as C's strftime does the directives templates use
// (strftime_now("%d %b %Y") in Llama 3.2's, "%Y-%m-%d" in Granite's);
// another directive is written as it is.
func strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
