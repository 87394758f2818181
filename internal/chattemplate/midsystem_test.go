package chattemplate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// A system message past the first (Anthropic's mid-conversation system
// messages, which Claude Code sends, or an OpenAI chat's) renders with
// every template that loads: where it is when the template renders it
// there, else folded into the leading system prompt. Its text is never
// lost, and no template refuses the conversation for it.
func TestLaterSystemMessagesRender(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	const mid = "MID_SYSTEM_MARKER"
	convs := map[string][]genq.Message{
		"after the last user turn": {{Role: genq.RoleSystem, Content: "Be brief."}, {Role: genq.RoleUser, Content: "Hi"},
			{Role: genq.RoleAssistant, Content: "Hello."}, {Role: genq.RoleUser, Content: "And now?"}, {Role: genq.RoleSystem, Content: mid}},
		"between turns, no leading system": {{Role: genq.RoleUser, Content: "Hi"}, {Role: genq.RoleSystem, Content: mid},
			{Role: genq.RoleAssistant, Content: "Hello."}, {Role: genq.RoleUser, Content: "And now?"}},
	}
	inPlace, folded := 0, 0
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jinja")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := New(string(src), SpecialTokens{}, WithClock(func() time.Time { return time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC) }))
		if err != nil {
			continue // a template llama-server refuses too (TestGolden)
		}
		if tmpl.caps.midSystem {
			inPlace++
		} else {
			folded++
		}
		for cname, msgs := range convs {
			out, err := tmpl.Render(msgs, nil)
			if err != nil {
				t.Errorf("%s, %s: %v", name, cname, err)
				continue
			}
			if !strings.Contains(out, mid) && tmpl.caps.systemRole {
				t.Errorf("%s, %s: the system message's text is lost:\n%s", name, cname, out)
			}
		}
	}
	t.Logf("%d templates render a later system message in place, %d fold it into the first", inPlace, folded)
}

func TestFoldSystem(t *testing.T) {
	for _, tt := range []struct {
		in, want []genq.Message
	}{
		{[]genq.Message{{Role: "system", Content: "a"}, {Role: "user", Content: "u"}, {Role: "system", Content: "b"}},
			[]genq.Message{{Role: "system", Content: "a\n\nb"}, {Role: "user", Content: "u"}}},
		{[]genq.Message{{Role: "user", Content: "u"}, {Role: "system", Content: "b"}, {Role: "assistant", Content: "x"}, {Role: "system", Content: "c"}},
			[]genq.Message{{Role: "system", Content: "b\n\nc"}, {Role: "user", Content: "u"}, {Role: "assistant", Content: "x"}}},
	} {
		got := foldSystem(tt.in)
		if len(got) != len(tt.want) {
			t.Fatalf("%v: %v", tt.in, got)
		}
		for i := range got {
			if got[i].Role != tt.want[i].Role || got[i].Content != tt.want[i].Content {
				t.Errorf("%v: %v, want %v", tt.in, got, tt.want)
			}
		}
	}
}
