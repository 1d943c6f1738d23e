package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/intentjobs/jobs"
)

// driverError stands for a database driver's own error type, which no
// caller of a store may ever see.
type driverError struct{ code int }

func (e *driverError) Error() string { return fmt.Sprintf("driver: error %d", e.code) }

func TestNewStorageError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cause   error
		message string
		unwraps error // what Unwrap must return
	}{
		{"driver error", &driverError{1213}, "driver: error 1213", nil},
		{"wrapped driver error", fmt.Errorf("commit: %w", &driverError{2013}), "commit: driver: error 2013", nil},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), "query: context canceled", context.Canceled},
		{"deadline", context.DeadlineExceeded, "context deadline exceeded", context.DeadlineExceeded},
		{"no cause", nil, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := jobs.NewStorageError(jobs.StorageBusy, "complete attempt", "1213", tc.cause)
			if err.Op != "complete attempt" || err.Kind != jobs.StorageBusy || err.Code != "1213" || err.Message != tc.message {
				t.Errorf("got %+v", err)
			}
			if !errors.Is(err, jobs.ErrStorage) {
				t.Errorf("%v does not match ErrStorage", err)
			}
			if got := err.Unwrap(); got != tc.unwraps {
				t.Errorf("Unwrap() = %v, want %v", got, tc.unwraps)
			}
			var de *driverError
			if errors.As(err, &de) {
				t.Errorf("the driver's error reaches the caller through %v", err)
			}
		})
	}
}
