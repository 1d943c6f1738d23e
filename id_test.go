package jobs

import (
	"strings"
	"testing"
	"time"
)

func TestNewID(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_780_000_000_000)
	seen := map[string]bool{}
	prev := ""
	for i := range 10000 {
		id := newID(jobPrefix, start.Add(time.Duration(i)*time.Millisecond))
		if len(id) != len(jobPrefix)+26 || !strings.HasPrefix(id, jobPrefix) {
			t.Fatalf("id %q has the wrong shape", id)
		}
		for _, c := range id[len(jobPrefix):] {
			if !strings.ContainsRune(crockford, c) {
				t.Fatalf("id %q has %q, outside Crockford base32", id, c)
			}
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("ids do not sort by time: %q after %q", id, prev)
		}
		prev = id
	}
	// Within one millisecond the 80 random bits differ: the last 16 characters.
	a, b := newID(attemptPrefix, start), newID(attemptPrefix, start)
	if a[:len(attemptPrefix)+10] != b[:len(attemptPrefix)+10] {
		t.Errorf("same millisecond, different time prefix: %s %s", a, b)
	}
	if a[len(attemptPrefix)+10:] == b[len(attemptPrefix)+10:] {
		t.Errorf("random parts equal: %s %s", a, b)
	}
}
