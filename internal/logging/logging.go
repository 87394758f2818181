// Package logging builds genq's structured logger: JSON lines on a writer,
// at a level chosen by name.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger at level ("debug", "info", "warn" or "error"),
// with component on every line.
func New(w io.Writer, level, component string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})).With("component", component), nil
}
