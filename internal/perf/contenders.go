package perf

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/intentjobs/jobs"
)

// Params and ResultJSON are what every benchmarked intent asks for and every
// completion offers.
var (
	Params     = json.RawMessage(`{"amount":1200,"currency":"eur"}`)
	ResultJSON = json.RawMessage(`{"charge":"ch_1","status":"paid"}`)
)

// Contender submits intents one way.
type Contender interface {
	// Name is "jobs" for the library, "sql" for the baseline, or a peer's name.
	Name() string
	// Submit records the benchmark intent for owner under key, once. It
	// returns the job's ID and whether this call created it.
	Submit(ctx context.Context, owner, key string) (id string, created bool, err error)
}

// Lifecycle is a contender that also runs attempts.
type Lifecycle interface {
	Contender
	// StartRunning starts an attempt of the pending job and records it as
	// acknowledged by the provider (StartAttempt + MarkRunning).
	StartRunning(ctx context.Context, jobID string) (attemptID string, err error)
	// Complete offers the attempt's result; won reports whether it
	// completed the job (false: another attempt had).
	Complete(ctx context.Context, attemptID string) (won bool, err error)
}

// Library is the jobs Manager.
type Library struct{ M *jobs.Manager }

// NewLibrary returns the library contender on e. Lost races are logged to
// a discarding handler: the benchmark measures the database work, not a
// log sink.
func NewLibrary(e *Env) *Library {
	return &Library{M: jobs.New(e.Store, jobs.Options{Logger: slog.New(slog.DiscardHandler)})}
}

// Name implements Contender.
func (l *Library) Name() string { return "jobs" }

// Submit implements Contender.
func (l *Library) Submit(ctx context.Context, owner, key string) (string, bool, error) {
	j, created, err := l.M.Submit(ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "psp", Params: Params})
	return j.ID, created, err
}

// StartRunning implements Lifecycle.
func (l *Library) StartRunning(ctx context.Context, jobID string) (string, error) {
	a, err := l.M.StartAttempt(ctx, jobID, "")
	if err != nil {
		return "", err
	}
	if _, err := l.M.MarkRunning(ctx, a.ID, "ref-"+a.ID); err != nil {
		return "", err
	}
	return a.ID, nil
}

// Complete implements Lifecycle.
func (l *Library) Complete(ctx context.Context, attemptID string) (bool, error) {
	_, err := l.M.Complete(ctx, attemptID, ResultJSON)
	if errors.Is(err, jobs.ErrLostRace) {
		return false, nil
	}
	return err == nil, err
}

// Baseline is the hand-written SQL a careful team would write for the same
// work on the same tables, through the same handles: Submit is one
// INSERT … ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING, plus a
// SELECT when the key exists; Complete is one statement (a data-modifying
// CTE) on PostgreSQL and one immediate transaction on SQLite.
type Baseline struct {
	e           *Env
	fingerprint string
	queries     map[string]string // in the dialect's form, made once
}

// NewBaseline returns the baseline contender on e.
func NewBaseline(e *Env) *Baseline {
	sum := sha256.Sum256(append([]byte("charge\x00psp\x00"), Params...))
	b := &Baseline{e: e, fingerprint: hex.EncodeToString(sum[:]), queries: map[string]string{}}
	for _, q := range []string{baseInsert, baseByKey, baseStartPG, baseOpenJob, baseInsertAttempt, baseRunning,
		baseCompletePG, baseAttempt, baseCAS, baseFinish} {
		b.queries[q] = e.q(q)
	}
	return b
}

func (b *Baseline) q(query string) string { return b.queries[query] }

// Name implements Contender.
func (b *Baseline) Name() string { return "sql" }

const (
	baseInsert = `INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
                  created_at, updated_at)
VALUES ($1, $2, $3, 'charge', 'psp', $4, $5, 'pending', 1, $6, $6)
ON CONFLICT (owner, idempotency_key) DO NOTHING
RETURNING id`
	baseByKey = `SELECT id, fingerprint FROM jobs WHERE owner = $1 AND idempotency_key = $2`

	baseStartPG = `WITH j AS (
    UPDATE jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = $3
     WHERE id = $1 AND state IN ('pending', 'running')
       AND NOT EXISTS (SELECT 1 FROM job_attempts a
                        WHERE a.job_id = $1 AND a.state IN ('starting', 'unknown', 'running'))
    RETURNING id, version, attempt_count, provider
)
INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, created_at, updated_at)
SELECT $2, id, attempt_count, provider, 'starting', version, $3, $3 FROM j
RETURNING id`
	baseOpenJob = `UPDATE jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = $2
 WHERE id = $1 AND state IN ('pending', 'running')
   AND NOT EXISTS (SELECT 1 FROM job_attempts a
                    WHERE a.job_id = $1 AND a.state IN ('starting', 'unknown', 'running'))
RETURNING version, attempt_count, provider`
	baseInsertAttempt = `INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, created_at, updated_at)
VALUES ($1, $2, $3, $4, 'starting', $5, $6, $6)`
	baseRunning = `UPDATE job_attempts SET state = 'running', provider_ref = $2, updated_at = $3
 WHERE id = $1 AND state = 'starting'`

	// The compare-and-swap in one statement.
	baseCompletePG = `WITH a AS (
    SELECT job_id, base_version FROM job_attempts
     WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
), won AS (
    UPDATE jobs SET state = 'succeeded', result = $2, completed_by = $1, version = jobs.version + 1,
                    updated_at = $3, closed_at = $3
      FROM a
     WHERE jobs.id = a.job_id AND jobs.version = a.base_version
       AND jobs.completed_by IS NULL AND jobs.state = 'running'
    RETURNING jobs.id
)
UPDATE job_attempts SET state = CASE WHEN EXISTS (SELECT 1 FROM won) THEN 'succeeded' ELSE 'lost' END,
       updated_at = $3, finished_at = $3
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
RETURNING state`
	baseAttempt = `SELECT job_id, base_version FROM job_attempts
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown')`
	baseCAS = `UPDATE jobs SET state = 'succeeded', result = $3, completed_by = $4, version = version + 1,
       updated_at = $5, closed_at = $5
 WHERE id = $1 AND version = $2 AND completed_by IS NULL AND state = 'running'`
	baseFinish = `UPDATE job_attempts SET state = $2, updated_at = $3, finished_at = $3 WHERE id = $1`
)

// Submit implements Contender.
func (b *Baseline) Submit(ctx context.Context, owner, key string) (string, bool, error) {
	var id string
	err := b.e.Writes.QueryRowContext(ctx, b.q(baseInsert),
		newID("job_"), owner, key, string(Params), b.fingerprint, b.e.ts(time.Now().UTC())).Scan(&id)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	var fp string
	if err := b.e.Reads.QueryRowContext(ctx, b.q(baseByKey), owner, key).Scan(&id, &fp); err != nil {
		return "", false, err
	}
	if fp != b.fingerprint {
		return "", false, fmt.Errorf("key %q bound to another request", key)
	}
	return id, false, nil
}

// StartRunning implements Lifecycle.
func (b *Baseline) StartRunning(ctx context.Context, jobID string) (string, error) {
	id := newID("att_")
	now := b.e.ts(time.Now().UTC())
	if b.e.Dialect == "postgres" {
		var got string
		if err := b.e.Writes.QueryRowContext(ctx, baseStartPG, jobID, id, now).Scan(&got); err != nil {
			return "", fmt.Errorf("start attempt: %w", err)
		}
	} else {
		tx, err := b.e.Writes.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		defer tx.Rollback()
		var version int64
		var seq int
		var provider string
		if err := tx.QueryRowContext(ctx, b.q(baseOpenJob), jobID, now).Scan(&version, &seq, &provider); err != nil {
			return "", fmt.Errorf("start attempt: %w", err)
		}
		if _, err := tx.ExecContext(ctx, b.q(baseInsertAttempt), id, jobID, seq, provider, version, now); err != nil {
			return "", err
		}
		if err := tx.Commit(); err != nil {
			return "", err
		}
	}
	res, err := b.e.Writes.ExecContext(ctx, b.q(baseRunning), id, "ref-"+id, b.e.ts(time.Now().UTC()))
	if err != nil {
		return "", err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return "", fmt.Errorf("mark running: attempt %s not starting", id)
	}
	return id, nil
}

// Complete implements Lifecycle.
func (b *Baseline) Complete(ctx context.Context, attemptID string) (bool, error) {
	now := b.e.ts(time.Now().UTC())
	if b.e.Dialect == "postgres" {
		var state string
		err := b.e.Writes.QueryRowContext(ctx, baseCompletePG, attemptID, string(ResultJSON), now).Scan(&state)
		return state == "succeeded", err
	}
	tx, err := b.e.Writes.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var jobID string
	var base int64
	if err := tx.QueryRowContext(ctx, b.q(baseAttempt), attemptID).Scan(&jobID, &base); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, b.q(baseCAS), jobID, base, string(ResultJSON), attemptID, now)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	state := "lost"
	if n == 1 {
		state = "succeeded"
	}
	if _, err := tx.ExecContext(ctx, b.q(baseFinish), attemptID, state, now); err != nil {
		return false, err
	}
	return n == 1, tx.Commit()
}

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

// newID returns prefix and 32 hex digits: microseconds, then randomness.
func newID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMicro()))
	rand.Read(b[8:])
	return prefix + hex.EncodeToString(b[:])
}
