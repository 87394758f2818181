package hub

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// TokenEnvVars lists the variables read for the token, in order; the first
// one set wins. HF_TOKEN and HUGGING_FACE_HUB_TOKEN are the hub's own names,
// MODEL_HUB_TOKEN genq's (docs/download.md).
func TokenEnvVars() []string {
	return []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MODEL_HUB_TOKEN"}
}

// Token is a hub access token. It prints, logs and marshals as a
// placeholder, so that no formatting slip can leak it.
type Token struct{ value string }

// NewToken wraps a token's text, trimmed of the blanks a file or a shell adds.
func NewToken(s string) Token { return Token{strings.TrimSpace(s)} }

// Empty reports whether there is no token: anonymous access.
func (t Token) Empty() bool { return t.value == "" }

func (t Token) String() string {
	if t.Empty() {
		return "(none)"
	}
	return "(redacted)"
}

func (t Token) GoString() string             { return "hub.Token" + t.String() }
func (t Token) LogValue() slog.Value         { return slog.StringValue(t.String()) }
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// LoadToken finds the token: in the environment first, then in file (a
// BuildKit secret such as /run/secrets/hf_token). It also says where it
// came from, for the log; the value itself is never shown.
func LoadToken(getenv func(string) string, file string) (tok Token, source string, err error) {
	for _, name := range TokenEnvVars() {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return NewToken(v), "$" + name, nil
		}
	}
	if file == "" {
		return Token{}, "none (anonymous)", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return Token{}, "", fmt.Errorf("reading the token file: %w", err)
	}
	tok = NewToken(string(b))
	if tok.Empty() {
		return Token{}, "", fmt.Errorf("the token file %s is empty", file)
	}
	return tok, "file " + file, nil
}
