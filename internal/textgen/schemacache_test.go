package textgen

import "testing"

func TestSchemaCacheBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mib   int
		avail uint64
		want  int64
	}{
		{"set", 100, 64 << 30, 100 << 20},
		{"set above the automatic bound", 2048, 1 << 30, 2048 << 20},
		{"unknown memory", 0, 0, maxSchemaCacheBytes},
		{"large machine", 0, 64 << 30, maxSchemaCacheBytes},
		{"a thirty-second", 0, 3 << 30, 96 << 20},
		{"small machine", 0, 512 << 20, minSchemaCacheBytes},
	} {
		if got := schemaCacheBytes(tc.mib, tc.avail); got != tc.want {
			t.Errorf("%s: schemaCacheBytes(%d, %d) = %d, want %d", tc.name, tc.mib, tc.avail, got, tc.want)
		}
	}
}
