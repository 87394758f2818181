package structured

// The grammar cache's bound on its bytes.

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

// TestCacheBytesBound fills a grammar cache past its bytes: it keeps the
// most recent grammars within the bound and counts what it dropped.
func TestCacheBytesBound(t *testing.T) {
	c := NewCache(100)
	one, err := Compile([]byte(`{"type":"string","maxLength":200,"minLength":1}`))
	if err != nil {
		t.Fatal(err)
	}
	c.MaxBytes = 3 * one.Bytes()
	for i := 0; i < 10; i++ {
		if _, err := c.Compile(fmt.Appendf(nil, `{"type":"string","maxLength":200,"minLength":%d}`, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Stats()
	if s.Bytes > c.MaxBytes || s.Grammars < 2 || s.Grammars > 3 || s.Evictions != uint64(10-s.Grammars) {
		t.Fatalf("stats %+v with a bound of %d bytes (%d a grammar)", s, c.MaxBytes, one.Bytes())
	}
	if c.get(sha256Of(`{"type":"string","maxLength":200,"minLength":10}`)) == nil {
		t.Error("the most recent grammar was dropped")
	}
}

func sha256Of(s string) [32]byte { return sha256.Sum256([]byte(s)) }
