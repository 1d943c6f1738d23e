package jobs

import (
	"context"
	"database/sql"
	"errors"
)

// Store.ReplaceJob in both SQL dialects, side by side as the
// compare-and-swap is in cas.go. Neither touches the schema: the unique
// constraint on (owner, idempotency_key) still binds every key, and a
// retired job holds RetiredKey(key, new job's ID) in that column, a value
// longer than any key a client can submit, unique per replacement, which
// scanJob reads back into Job.Key and Job.ReplacedBy. Submit's own
// statement is unchanged: a key is retired only by the statements below.

const (
	// pgReplaceJob retires the old job's key and inserts the new job, in
	// one statement: both or neither. The UPDATE locks the old row; a
	// concurrent replacement waits for it, then finds the key moved and
	// retires nothing. The INSERT's unique check does not see the old
	// row's key, which this statement itself has moved; a concurrent
	// Submit of the key waits for this statement's transaction and then
	// finds the new job. No row comes back if nothing was retired.
	pgReplaceJob = `WITH retired AS (
    UPDATE jobs SET idempotency_key = $9
     WHERE id = $10 AND owner = $2 AND idempotency_key = $3 AND state IN ($11, $12, $13)
    RETURNING id
)
INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8 WHERE EXISTS (SELECT 1 FROM retired)
RETURNING ` + jobCols

	// sqliteRetireKey is the first statement of SQLiteStore.ReplaceJob's
	// transaction; the second is sqliteCreateJob. The write lock, taken
	// at BEGIN, makes the pair atomic against every other writer.
	sqliteRetireKey = `UPDATE jobs SET idempotency_key = ?4
    WHERE id = ?1 AND owner = ?2 AND idempotency_key = ?3 AND state IN (?5, ?6, ?7)`
)

// ReplaceJob implements Store.
func (s *PostgresStore) ReplaceJob(ctx context.Context, r JobReplacement) (Job, bool, error) {
	if err := r.Check(); err != nil {
		return Job{}, false, err
	}
	j := r.New
	a, b, c := jobStates(r.From)
	got, err := scanJob(s.db.QueryRowContext(ctx, pgReplaceJob,
		j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt,
		RetiredKey(j.Key, j.ID), r.OldID, a, b, c))
	if !errors.Is(err, sql.ErrNoRows) {
		return got, err == nil, s.interpret("replace job", err)
	}
	// Nothing retired: the key is another job's now, or free.
	return s.CreateJob(ctx, j)
}

// ReplaceJob implements Store.
func (s *SQLiteStore) ReplaceJob(ctx context.Context, r JobReplacement) (Job, bool, error) {
	if err := r.Check(); err != nil {
		return Job{}, false, err
	}
	j := r.New
	a, b, c := jobStates(r.From)
	var got Job
	var created bool
	err := s.inTx(ctx, "replace job", func(ctx context.Context, conn *sql.Conn) error {
		n, err := rowsAffected(ctx, conn, sqliteRetireKey, r.OldID, j.Owner, j.Key, RetiredKey(j.Key, j.ID), a, b, c)
		if err != nil {
			return s.interpret("replace job", err)
		}
		got, created, err = s.createJob(ctx, conn, j)
		if err == nil && n == 1 && !created {
			// The key was retired, so nothing else can hold it.
			err = &StorageError{Op: "replace job", Kind: StorageOther, Message: "the retired key is held by another job"}
		}
		return err
	})
	if err != nil {
		return Job{}, false, err
	}
	return got, created, nil
}

// jobStates pads ReplaceJob's states to three, with a state no job is
// ever in, for the three placeholders of the statements above.
func jobStates(from []JobState) (a, b, c string) {
	var s [3]string
	for i := range s {
		if i < len(from) {
			s[i] = string(from[i])
		}
	}
	return s[0], s[1], s[2]
}
