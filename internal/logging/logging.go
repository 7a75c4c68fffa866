// Package logging builds the JSON slog loggers both binaries write to stdout.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel parses debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

// New returns a JSON logger at level writing to w; an unknown level is info.
func New(w io.Writer, level string) *slog.Logger {
	l, err := ParseLevel(level)
	if err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
