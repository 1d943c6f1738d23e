package jobshttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/intentjobs/jobs/jobshttp"
)

func keyOf(v string) (string, error) {
	r, _ := http.NewRequest("POST", "/jobs", nil)
	r.Header.Set("Idempotency-Key", v)
	return jobshttp.IdempotencyKey(r)
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   string // "" = refused
	}{
		{"abc", "abc"},
		{`"abc"`, "abc"},
		{"  abc\t", "abc"},
		{`"a b"`, "a b"},
		{`"a\"b"`, `a"b`},
		{`"a\\b"`, `a\b`},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"a\"b", `a"b`}, // a bare token may contain a quote after its first byte
		{strings.Repeat("x", 255), strings.Repeat("x", 255)},
		{`"` + strings.Repeat("\\\\", 255) + `"`, strings.Repeat(`\`, 255)},

		{"", ""},
		{`""`, ""},
		{strings.Repeat("x", 256), ""},
		{`"` + strings.Repeat("x", 256) + `"`, ""},
		{"a b", ""},
		{"a\x7fb", ""},
		{"ключ", ""},
		{`"ключ"`, ""},
		{`"abc`, ""},
		{`"abc"x`, ""},
		{`"a\b"`, ""},
		{`"abc\"`, ""},
	} {
		got, err := keyOf(tc.header)
		if tc.want == "" {
			if err == nil {
				t.Errorf("IdempotencyKey(%q) = %q; want an error", tc.header, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("IdempotencyKey(%q) = %q, %v; want %q", tc.header, got, err, tc.want)
		}
	}
}

// FuzzIdempotencyKey checks that every accepted key is 1 to 255 bytes of
// printable ASCII, and that quoting it as a structured-field string names
// the same key. Run longer with: go test -fuzz FuzzIdempotencyKey ./jobshttp
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"a\\b"`, "", `""`, `"`, "a b", "\x00", strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		if strings.ContainsAny(header, "\r\n\x00") {
			return // not a header value net/http would deliver
		}
		key, err := keyOf(header)
		if err != nil {
			return
		}
		if len(key) == 0 || len(key) > jobshttp.MaxKeyBytes {
			t.Fatalf("accepted a key of %d bytes from %q", len(key), header)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < ' ' || key[i] > '~' {
				t.Fatalf("accepted a non-printable key %q from %q", key, header)
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := keyOf(quoted); err != nil || again != key {
			t.Fatalf("key %q quoted as %s reads back as %q, %v", key, quoted, again, err)
		}
	})
}
