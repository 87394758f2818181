package structured

// The counts a schema's min/max keywords set, read and checked.

import (
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

func count(s *value, key, path string, limit int) (int, bool, error) {
	v := s.get(key)
	if v == nil {
		return 0, false, nil
	}
	n, err := strconv.Atoi(numberText(v.num.String())) // 2.0 is 2
	if v.kind != 'n' || err != nil || n < 0 {
		return 0, false, genq.Errorf(genq.Invalid, "at %s: %s must be a non-negative integer", path, key)
	}
	if n > limit {
		return 0, false, genq.Errorf(genq.Invalid, "at %s: %s is %d; genq enforces at most %d", path, key, n, limit)
	}
	return n, true, nil
}

// bounds are minKey and maxKey where they unroll: at most MaxRepeat.
func bounds(s *value, minKey, maxKey, path string) (int, int, error) {
	return boundsUpTo(s, minKey, maxKey, path, grammar.MaxRepeat)
}

// boundsUpTo are minKey and maxKey (max -1 when absent), each at most limit.
func boundsUpTo(s *value, minKey, maxKey, path string, limit int) (int, int, error) {
	min, _, err := count(s, minKey, path, limit)
	if err != nil {
		return 0, 0, err
	}
	max, hasMax, err := count(s, maxKey, path, limit)
	if err != nil {
		return 0, 0, err
	}
	if !hasMax {
		max = -1
	} else if max < min {
		return 0, 0, genq.Errorf(genq.Invalid, "at %s: %s (%d) is below %s (%d): it can never be satisfied", path, maxKey, max, minKey, min)
	}
	return min, max, nil
}

// maxCount bounds a counted repeat's bounds: past it a schema is refused.
const maxCount = 1 << 20

// overRepeat names the bound of minKey and maxKey past MaxRepeat, if any.
func overRepeat(min, max int, minKey, maxKey string) (string, int, bool) {
	switch {
	case max > grammar.MaxRepeat:
		return maxKey, max, true
	case min > grammar.MaxRepeat:
		return minKey, min, true
	}
	return "", 0, false
}

// countsAlone refuses a string length past MaxRepeat beside other
// constraints: their product takes copies, and copies stop at MaxRepeat.
func countsAlone(min, max, parts int, path string) error {
	key, n, over := overRepeat(min, max, "minLength", "maxLength")
	if !over || parts == 1 {
		return nil
	}
	return genq.Errorf(genq.Invalid, "at %s: %s is %d; genq enforces at most %d beside a pattern or format", path, key, n, grammar.MaxRepeat)
}

// countedItems refuses an item count past MaxRepeat where the array's
// other keywords (prefixItems, contains, uniqueItems) count items in
// states of their own.
func countedItems(s *value, min, max int, path string) error {
	key, n, over := overRepeat(min, max, "minItems", "maxItems")
	if !over {
		return nil
	}
	for _, k := range []string{"prefixItems", "contains", "uniqueItems"} {
		if s.get(k) != nil {
			return genq.Errorf(genq.Invalid, "at %s: %s is %d; genq enforces at most %d beside %s", path, key, n, grammar.MaxRepeat, k)
		}
	}
	if it := s.get("items"); it != nil && it.kind == 'a' {
		return genq.Errorf(genq.Invalid, "at %s: %s is %d; genq enforces at most %d beside items as an array", path, key, n, grammar.MaxRepeat)
	}
	return nil
}
