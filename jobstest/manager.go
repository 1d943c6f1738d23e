package jobstest

import (
	"testing"

	"github.com/intentjobs/jobs"
)

// NewManager returns jobs.New(s, opts), and fails t if New refuses the
// options.
func NewManager(t testing.TB, s jobs.Store, opts jobs.Options) *jobs.Manager {
	t.Helper()
	m, err := jobs.New(s, opts)
	if err != nil {
		t.Fatalf("jobs.New: %v", err)
	}
	return m
}
