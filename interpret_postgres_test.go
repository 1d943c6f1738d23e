package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intentjobs/jobs"
)

// TestPostgresErrorKinds checks the kind the PostgreSQL store gives the
// driver's errors that callers retry on: a connection gone (closed before
// the statement was sent, or lost under it) is unavailable, whatever the
// layer that reports it.
func TestPostgresErrorKinds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want jobs.StorageKind
	}{
		{"connection closed before use", fmt.Errorf("prepare: %w", pgconn.ErrConnClosed), jobs.StorageUnavailable},
		{"connection lost mid-read", io.ErrUnexpectedEOF, jobs.StorageUnavailable},
		{"server shutting down", &pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}, jobs.StorageUnavailable},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, jobs.StorageBusy},
		{"no such table", &pgconn.PgError{Code: "42P01"}, jobs.StorageSchema},
		{"no such schema (Schema before migrating)", &pgconn.PgError{Code: "3F000"}, jobs.StorageSchema},
		{"context ended", context.DeadlineExceeded, jobs.StorageUnavailable},
		{"something else", errors.New("boom"), jobs.StorageOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := jobs.InterpretPostgres("complete attempt", c.err)
			var se *jobs.StorageError
			if !errors.As(err, &se) || se.Kind != c.want || !errors.Is(err, jobs.ErrStorage) {
				t.Fatalf("interpret(%v) = %v, want a StorageError of kind %s", c.err, err, c.want)
			}
		})
	}
}
