package textgen

import "testing"

func TestStopPrefixLen(t *testing.T) {
	tests := []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello", nil, 0},
		{"hello", []string{"\n\n"}, 0},
		{"hello\n", []string{"\n\n"}, 1},
		{"hello wor", []string{"world", "or"}, 3},
		{"ab", []string{"abc"}, 2},
		{"xé", []string{"éa"}, 2},
		{"a", []string{"a"}, 0}, // a whole stop string is cutAtStop's
	}
	for _, tt := range tests {
		if got := stopPrefixLen(tt.text, tt.stops); got != tt.want {
			t.Errorf("stopPrefixLen(%q, %q) = %d, want %d", tt.text, tt.stops, got, tt.want)
		}
	}
}
