package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
)

// An error line has jobsctl's prefix and no other: the library's "jobs: "
// is dropped wherever it begins a part of the message.
func TestErrorLinesHaveOnePrefix(t *testing.T) {
	t.Parallel()
	db := databases(t)[0]
	h := seed(t, db.store)
	args := func(a ...string) []string { return append(append([]string{}, db.flags...), a...) }
	cases := []struct {
		name string
		args []string
		code int
		line string
	}{
		{"job not found", args("show", "job_nope"), 1, "jobsctl: job job_nope: not found\n"},
		{"attempt not found", args("cancel", "att_nope", "--reason", "x"), 1, "jobsctl: attempt att_nope: not found\n"},
		{"no job for a key", args("show", "--owner", "user-7", "--key", "order-99"), 1, "jobsctl: no job for this owner and key: not found\n"},
		{"refused transition", args("cancel", h.rHedge.ID, "--reason", "x"), 1,
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
