package structured

// The counts a schema's min/max keywords set, read and checked.

import (
	"strconv"

	"github.com/genq/genq/internal/genq"
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

// bounds are minKey and maxKey where they unroll: at most maxRepeat.
func bounds(s *value, minKey, maxKey, path string) (int, int, error) {
	return boundsUpTo(s, minKey, maxKey, path, maxRepeat)
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
