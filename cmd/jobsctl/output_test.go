package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

var (
	// dateTime finds anything that looks like a time in text output.
	dateTime = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d| [A-Z]{3,4})?`)
	// textTime is the one way text output prints a time.
	textTime = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$`)
)

// Text output prints every time one way, with its zone; JSON output has
// RFC 3339, zone included.
func TestTimesCarryTheirZone(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			h := seed(t, db.store)
			texts := [][]string{{"show", h.raced.ID}, {"purge", "--dry-run"}, {"schema"}, {"purge"}}
			for _, cmd := range texts {
				r := jobsctl(t, nil, db.args(cmd...)...)
				r.want(t, 0)
				times := dateTime.FindAllString(r.stdout, -1)
				if len(times) == 0 {
					t.Errorf("%v prints no time:\n%s", cmd, r.stdout)
				}
				for _, s := range times {
					if !textTime.MatchString(s) {
						t.Errorf("%v prints the time %q, want the form 2026-12-02 14:29:34.000 UTC:\n%s", cmd, s, r.stdout)
					}
				}
			}
			created := h.raced.CreatedAt.UTC().Format("2006-01-02 15:04:05.000 UTC")
			jobsctl(t, nil, db.args("show", h.raced.ID)...).want(t, 0, "created          "+created, created+"  +0s       job created")

			jsons := [][]string{{"show", h.raced.ID}, {"stale"}, {"purge", "--dry-run"}, {"schema"}}
			for _, cmd := range jsons {
				r := jobsctl(t, nil, db.args(append([]string{"--json"}, cmd...)...)...)
				r.want(t, 0)
				var v any
				if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
					t.Fatalf("%v --json: %v\n%s", cmd, err, r.stdout)
				}
				n := 0
				walkJSON(v, func(key string, val any) {
					s, ok := val.(string)
					if !ok || !dateTime.MatchString(s) {
						return
					}
					n++
					if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
						t.Errorf("%v --json: %s is %q, not RFC 3339: %v", cmd, key, s, err)
					}
				})
				if n == 0 {
					t.Errorf("%v --json has no time:\n%s", cmd, r.stdout)
				}
			}
		})
	}
}

// Every key of every JSON output is snake_case, check's violations too.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	t.Parallel()
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			h := seed(t, db.store)
			db.failUnderOpenAttempt(t, h.doubt.ID) // a violation to print
			cmds := []struct {
				args []string
				code int
				keys []string // among the keys printed
			}{
				{[]string{"check"}, 1, []string{"violations", "rule", "job_id", "detail"}},
				{[]string{"show", h.raced.ID}, 0, []string{"completed_by", "provider_ref", "offset_ns"}},
				{[]string{"stale"}, 0, []string{"job_id", "silent_for_ns"}},
				{[]string{"purge", "--dry-run"}, 0, []string{"dry_run", "cutoff"}},
				{[]string{"schema"}, 0, []string{"database_version", "applied_at"}},
				{[]string{"cancel", h.unknown.ID, "--reason", "confirmed never received"}, 0, []string{"job_id", "finished_at"}},
			}
			for _, c := range cmds {
				r := jobsctl(t, nil, db.args(append([]string{"--json"}, c.args...)...)...)
				r.want(t, c.code)
				var v any
				if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
					t.Fatalf("%v --json: %v\n%s", c.args, err, r.stdout)
				}
				seen := map[string]bool{}
				walkJSON(v, func(key string, _ any) {
					seen[key] = true
					if !snake.MatchString(key) {
						t.Errorf("%v --json has the key %q, not snake_case", c.args, key)
					}
				})
				for _, k := range c.keys {
					if !seen[k] {
						t.Errorf("%v --json lacks the key %q:\n%s", c.args, k, r.stdout)
					}
				}
			}
		})
	}
}

// walkJSON calls fn for every member of every object in v.
func walkJSON(v any, fn func(key string, val any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			fn(k, val)
			walkJSON(val, fn)
		}
	case []any:
		for _, val := range v {
			walkJSON(val, fn)
		}
	}
}

// An error line has jobsctl's prefix and no other: the library's "jobs: "
// is dropped wherever it begins a part of the message.
func TestErrorLinesHaveOnePrefix(t *testing.T) {
	t.Parallel()
	db := databases(t)[0]
	h := seed(t, db.store)
	cases := []struct {
		name string
		args []string
		code int
		line string
	}{
		{"job not found", db.args("show", "job_nope"), 1, "jobsctl: job job_nope: not found\n"},
		{"attempt not found", db.args("cancel", "att_nope", "--reason", "x"), 1, "jobsctl: attempt att_nope: not found\n"},
		{"no job for a key", db.args("show", "--owner", "user-7", "--key", "order-99"), 1, "jobsctl: no job for this owner and key: not found\n"},
		{"refused transition", db.args("cancel", h.rHedge.ID, "--reason", "x"), 1,
			"jobsctl: attempt " + h.rHedge.ID + " cannot move from succeeded to cancelled\n"},
		{"unreachable database", []string{"--postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5", "schema"}, 1,
			"jobsctl: schema version: unavailable: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := jobsctl(t, nil, tc.args...)
			r.wantError(t, tc.code, strings.TrimPrefix(tc.line, "jobsctl: "))
			if !strings.HasPrefix(r.stderr, tc.line) {
				t.Errorf("stderr %q, want %q", r.stderr, tc.line)
			}
		})
	}
	messages := []struct {
		err  error
		want string
	}{
		{jobs.ErrNotFound, "not found"},
		{&jobs.InputError{Field: "Key", Problem: "empty"}, "invalid Key: empty"},
		{fmt.Errorf("jobs: job x: %w", jobs.ErrNotFound), "job x: not found"},
		{&jobs.StorageError{Op: "list jobs", Kind: jobs.StorageSchema, Message: "no such table: jobs"}, "list jobs: schema: no such table: jobs"},
		{errors.New("jobs:\n  two\tlines"), "two lines"},
	}
	for _, m := range messages {
		if got := message(m.err); got != m.want {
			t.Errorf("message(%q) = %q, want %q", m.err, got, m.want)
		}
	}
}
