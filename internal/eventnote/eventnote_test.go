package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShorten(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int // 0: Shorten
		want string
	}{
		{name: "short note unchanged", in: "dns failed", want: "dns failed"},
		{name: "exactly the limit unchanged", in: strings.Repeat("x", MaxBytes), want: strings.Repeat("x", MaxBytes)},
		{name: "one byte over is cut", in: strings.Repeat("x", MaxBytes+1), want: strings.Repeat("x", MaxBytes-3) + "..."},
		{
			// "é" is two bytes starting at MaxBytes-4: the cut at MaxBytes-3
			// would split it, so it moves back before it.
			name: "cut on a rune boundary", in: strings.Repeat("x", MaxBytes-4) + "é and more",
			want: strings.Repeat("x", MaxBytes-4) + "...",
		},
		{
			name: "four-byte runes", in: strings.Repeat("😀", MaxBytes/4+1),
			want: strings.Repeat("😀", (MaxBytes-3)/4) + "...",
		},
		{name: "invalid UTF-8 replaced", in: "bad \xff byte", want: "bad \uFFFD byte"},
		{
			// Each invalid byte becomes three: the limit holds after that.
			name: "invalid UTF-8 counted after replacement", in: strings.Repeat("\xffa", MaxBytes/2),
			want: strings.Repeat("\uFFFDa", (MaxBytes-3)/4) + "...",
		},
		{name: "empty", in: "", want: ""},
		// Cut, for shorter texts: a cleanup plugin's failure in the
		// cleanup-status annotation, a storage API's answer in an error.
		{name: "cut fits", in: "ünïcode", max: 10, want: "ünïcode"},
		{name: "cut before a two-byte rune", in: "abcdé fails", max: 8, want: "abcd..."},
		{name: "cut after a whole rune", in: "abcé fails", max: 8, want: "abcé..."},
		{name: "cut does not split a three-byte rune", in: "abc€€", max: 8, want: "abc..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, limit := Shorten(tt.in), MaxBytes
			if tt.max > 0 {
				got, limit = Cut(tt.in, tt.max), tt.max
			}
			if got != tt.want {
				t.Errorf("got %q (%d bytes), want %q (%d bytes)", got, len(got), tt.want, len(tt.want))
			}
			if len(got) > limit || !utf8.ValidString(got) {
				t.Errorf("got %d bytes, valid UTF-8 %v; want at most %d, valid", len(got), utf8.ValidString(got), limit)
			}
		})
	}
}
