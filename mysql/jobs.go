package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/intentjobs/jobs"
)

// CreateJob implements jobs.Store: one INSERT, which the unique index on
// (owner, idempotency_key) decides. A duplicate is read back by its key
// with a new statement, which sees the row that the insert ran into.
// The insert waits for a concurrent transaction that inserted the same
// key, and finds its row if that commits.
func (s *Store) CreateJob(ctx context.Context, j jobs.Job) (jobs.Job, bool, error) {
	if s.keys.takenKeys() {
		// A storm of retries: the read of the key first, one round trip
		// where a refused insert and the read take two. A miss falls
		// through to the insert, which decides.
		got, err := s.JobByKey(ctx, j.Owner, j.Key)
		if err == nil {
			s.keys.record(false)
			return got, false, nil
		}
		if !errors.Is(err, jobs.ErrNotFound) {
			return jobs.Job{}, false, err
		}
	}
	got, created, err := s.createJob(ctx, j)
	if err == nil {
		s.keys.record(created)
	}
	return got, created, err
}

// createJob inserts j, or reads the job that holds its key.
func (s *Store) createJob(ctx context.Context, j jobs.Job) (jobs.Job, bool, error) {
	for range s.cfg.maxRetries {
		var created bool
		err := s.retrying(ctx, "create job", func() error {
			_, err := s.db.ExecContext(ctx, qInsertJob, j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params),
				j.Fingerprint, dbTime(j.CreatedAt), dbTime(j.CreatedAt))
			created = err == nil
			return err
		})
		switch {
		case err == nil && created:
			return newJob(j), true, nil
		case !errors.Is(err, errUniqueKey):
			return jobs.Job{}, false, s.unexpected("create job", err)
		}
		got, err := s.JobByKey(ctx, j.Owner, j.Key)
		if !errors.Is(err, jobs.ErrNotFound) {
			return got, false, err
		}
		// Deleted in between (retention): insert again.
	}
	return jobs.Job{}, false, errKeptChanging("create job")
}

// newJob is j as CreateJob stores it.
func newJob(j jobs.Job) jobs.Job {
	j.State, j.Version, j.Attempts = jobs.JobPending, 1, 0
	j.CreatedAt = stored(j.CreatedAt)
	j.UpdatedAt = j.CreatedAt
	j.Result, j.CompletedBy, j.Reason, j.ClosedAt, j.ReplacedBy = nil, "", "", time.Time{}, ""
	return j
}

// unexpected turns a unique violation that a write did not expect into a
// *jobs.StorageError; any other error passes.
func (s *Store) unexpected(op string, err error) error {
	if errors.Is(err, errUniqueKey) || errors.Is(err, errUniqueInDoubt) {
		return jobs.NewStorageError(jobs.StorageOther, op, "1062", err)
	}
	return err
}

// CreateJobTx implements jobs.TxStore: CreateJob inside the caller's
// transaction, once. A deadlock or a lock wait timeout there is a
// *jobs.StorageError of kind jobs.StorageConflict: InnoDB rolled back the
// caller's transaction (or at least the statement), and the caller runs
// it again. On Galera, a certification conflict shows when the caller
// commits, as the driver's error 1213 from tx.Commit.
func (s *Store) CreateJobTx(ctx context.Context, tx jobs.DBTX, j jobs.Job) (jobs.Job, bool, error) {
	if tx == nil {
		return jobs.Job{}, false, &jobs.InputError{Field: "tx", Problem: "nil"}
	}
	for range s.cfg.maxRetries {
		_, err := tx.ExecContext(ctx, qInsertJob, j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params),
			j.Fingerprint, dbTime(j.CreatedAt), dbTime(j.CreatedAt))
		if err == nil {
			return newJob(j), true, nil
		}
		if !errors.Is(interpret("create job", err), errUniqueKey) {
			return jobs.Job{}, false, inCallerTx("create job", err)
		}
		got, err := scanJob(tx.QueryRowContext(ctx, qJobByKeyLocking, j.Owner, j.Key))
		if err == nil {
			return got, false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return jobs.Job{}, false, inCallerTx("get job by key", err)
		}
	}
	return jobs.Job{}, false, errKeptChanging("create job")
}

// inCallerTx maps the error of a statement run in the caller's
// transaction: a conflict with a concurrent transaction, which the store
// cannot retry inside a transaction it does not own, is StorageConflict.
func inCallerTx(op string, err error) error {
	if retryable(err) {
		se := interpret(op, err).(*jobs.StorageError)
		return jobs.NewStorageError(jobs.StorageConflict, op, se.Code, err)
	}
	return interpret(op, err)
}

// ReplaceJob implements jobs.Store, in one transaction: it locks the old
// job's row, reads its attempts under that lock, retires its key and
// inserts the new job, or refuses. A concurrent CreateAttempt, Complete or
// replacement of the old job waits for the lock, and on Galera conflicts
// at certification with the update of the row; no attempt can start on
// the job once it is terminal. If nothing is retired, it is
// CreateJob(r.New).
func (s *Store) ReplaceJob(ctx context.Context, r jobs.JobReplacement) (jobs.Job, bool, error) {
	if err := r.Check(); err != nil {
		return jobs.Job{}, false, err
	}
	n := r.New
	var retired bool
	err := s.inTx(ctx, "replace job", func(tx *sql.Tx) error {
		retired = false
		old, err := scanJob(tx.QueryRowContext(ctx, qLockJob, r.OldID))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if old.Owner != n.Owner || old.Key != n.Key || old.ReplacedBy != "" || !slices.Contains(r.From, old.State) {
			return nil
		}
		var id string
		var state jobs.AttemptState
		var reason string
		err = tx.QueryRowContext(ctx, qReplaceGuard, r.OldID, jobs.ReasonDroppedJobCancelled, jobs.ReasonDroppedJobFailed).
			Scan(&id, &state, &reason)
		switch {
		case err == nil && state.Open():
			return &jobs.AttemptInFlightError{JobID: r.OldID, AttemptID: id, State: state}
		case err == nil:
			return nil // a result was dropped: the provider acted, and the job keeps its key
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, qRetireKey, jobs.RetiredKey(n.Key, n.ID), r.OldID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qInsertJob, n.ID, n.Owner, n.Key, n.Kind, n.Provider, string(n.Params),
			n.Fingerprint, dbTime(n.CreatedAt), dbTime(n.CreatedAt)); err != nil {
			return err
		}
		retired = true
		return nil
	})
	if err != nil {
		return jobs.Job{}, false, s.unexpected("replace job", err)
	}
	if retired {
		return newJob(n), true, nil
	}
	return s.createJob(ctx, n)
}

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, id string) (jobs.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, qJobByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Job{}, jobNotFound(id)
	}
	return j, interpret("get job", err)
}

// JobByKey implements jobs.Store.
func (s *Store) JobByKey(ctx context.Context, owner, key string) (jobs.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, qJobByKey, owner, key))
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Job{}, errNoJobForKey
	}
	return j, interpret("get job by key", err)
}

// CloseJob implements jobs.Store: under the job's row lock, it refuses a
// terminal job, and for JobFailed a job with an open attempt; otherwise
// it closes the job.
func (s *Store) CloseJob(ctx context.Context, c jobs.JobClose) (jobs.Job, error) {
	if err := c.Check(); err != nil {
		return jobs.Job{}, err
	}
	var out jobs.Job
	err := s.inTx(ctx, "close job", func(tx *sql.Tx) error {
		j, err := scanJob(tx.QueryRowContext(ctx, qLockJob, c.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return jobNotFound(c.ID)
		}
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			return &jobs.JobClosedError{JobID: j.ID, State: j.State}
		}
		if c.To == jobs.JobFailed {
			b, err := scanBlocker(tx.QueryRowContext(ctx, qBlocker, c.ID))
			if err == nil {
				b.JobID = c.ID
				return b
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		at := dbTime(c.At)
		if _, err := tx.ExecContext(ctx, qCloseJob, string(c.To), c.Reason, at, at, c.ID); err != nil {
			return err
		}
		j.State, j.Version, j.Reason = c.To, j.Version+1, c.Reason
		j.UpdatedAt, j.ClosedAt = stored(c.At), stored(c.At)
		out = j
		return nil
	})
	if err != nil {
		return jobs.Job{}, err
	}
	s.notify.wake(out.ID)
	return out, nil
}

// keyStreak follows the keys CreateJob meets: taken ones in a row (n < 0,
// down to -keyStreakLength) or new ones (n > 0). Past a streak of taken
// keys (retries, a storm on one key) CreateJob reads the key before it
// inserts; the first new key ends the streak.
type keyStreak struct{ n atomic.Int32 }

const keyStreakLength = 4

func (k *keyStreak) takenKeys() bool { return k.n.Load() <= -keyStreakLength }

func (k *keyStreak) record(created bool) {
	switch n := k.n.Load(); {
	case created && n < 0:
		k.n.Store(1)
	case created && n < keyStreakLength:
		k.n.Add(1)
	case !created && n > 0:
		k.n.Store(-1)
	case !created && n > -keyStreakLength:
		k.n.Add(-1)
	}
}
