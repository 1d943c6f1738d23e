package jobshttp

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// preferredWait returns the wait preference of r (RFC 7240: Prefer:
// wait=N, in seconds), capped at max, and whether there is one. A
// malformed or zero wait is ignored, as RFC 7240 asks of preferences a
// server cannot honour.
func preferredWait(r *http.Request, max time.Duration) (time.Duration, bool) {
	for _, h := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(h, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(pref), "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			value, _, _ = strings.Cut(value, ";") // preference parameters: none defined for wait
			value = strings.Trim(strings.TrimSpace(value), `"`)
			n, err := strconv.ParseUint(value, 10, 64)
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				n, err = uint64(max/time.Second), nil
			}
			if err != nil || n == 0 {
				return 0, false
			}
			d := time.Duration(min(n, uint64(max/time.Second))) * time.Second
			return d, d > 0
		}
	}
	return 0, false
}
