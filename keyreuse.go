package jobs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// KeyReuse says whether Submit may take an idempotency key back from the job
// bound to it, once that job has ended without a result, and bind it to a
// new job for the same intent. The zero value, KeyReuseNever, keeps the key
// bound to its job until the job is purged.
//
// Whatever the policy, a key is never taken from a job while one of its
// attempts is starting, running or unknown: the provider may still act on
// that attempt, and a new job would carry the intent out twice. Submit then
// returns an *AttemptInFlightError naming the attempt and writes nothing;
// once the attempt is resolved as not having acted (failed, or cancelled),
// the same Submit takes the key. Nor is a key taken from a job one of whose
// attempts delivered a result after the job was cancelled
// (Attempt.ResultDropped): the provider did act, so Submit returns that job,
// as for a job that succeeded. The store decides both in the same atomic
// step that moves the key (Store.ReplaceJob).
type KeyReuse uint8

// Key reuse policies.
const (
	// KeyReuseNever keeps a key bound to its job, whatever became of it:
	// the same intent submitted again returns the job as it is, failed or
	// cancelled included. The default.
	KeyReuseNever KeyReuse = iota

	// KeyReuseAfterFailure frees a key whose job failed (given up with
	// FailJob): the same intent submitted again creates a new job under
	// the key. A cancelled job keeps its key, since cancelling is a
	// decision, not an outcome to try again.
	KeyReuseAfterFailure

	// KeyReuseAfterFailureOrCancel frees a key whose job failed or was
	// cancelled.
	KeyReuseAfterFailureOrCancel
)

// Valid reports whether r is one of the policies.
func (r KeyReuse) Valid() bool { return r <= KeyReuseAfterFailureOrCancel }

// String returns the policy's name: "never", "after-failure" or
// "after-failure-or-cancel".
func (r KeyReuse) String() string {
	switch r {
	case KeyReuseNever:
		return "never"
	case KeyReuseAfterFailure:
		return "after-failure"
	case KeyReuseAfterFailureOrCancel:
		return "after-failure-or-cancel"
	}
	return "KeyReuse(" + strconv.Itoa(int(r)) + ")"
}

// Frees reports whether r lets a new job take the key of a job in state s,
// if none of its attempts may still act or has acted. A job that
// succeeded, or is still pending or running, never gives up its key.
func (r KeyReuse) Frees(s JobState) bool {
	switch s {
	case JobFailed:
		return r == KeyReuseAfterFailure || r == KeyReuseAfterFailureOrCancel
	case JobCancelled:
		return r == KeyReuseAfterFailureOrCancel
	}
	return false
}

// states lists the job states r frees a key from.
func (r KeyReuse) states() []JobState {
	switch r {
	case KeyReuseAfterFailure:
		return []JobState{JobFailed}
	case KeyReuseAfterFailureOrCancel:
		return []JobState{JobFailed, JobCancelled}
	}
	return nil
}

// A retired key is what a job holds in the store's key column once a new
// job has taken its key (see Store.ReplaceJob): a header that names the new
// job, padded to retiredKeyHeader bytes, then the original key. It is
// longer than any key Submit accepts (255 bytes), so no client's key can
// ever equal it, and the unique constraint on (owner, key) that binds live
// keys also keeps every retired key apart, with no change to the schema.
const (
	retiredKeyPrefix = "jobs:retired-key;replaced-by="
	retiredKeyHeader = 320 // bytes before the original key; over maxNameBytes
)

// RetiredKey returns the key a store records for a job whose key was taken
// over by the job replacedBy: unique per replacement, longer than any key a
// client can submit, and read back with ParseRetiredKey. Stores call it in
// ReplaceJob; JobByKey(owner, RetiredKey(key, id)) finds the job that the
// job id replaced.
func RetiredKey(key, replacedBy string) string {
	head := retiredKeyPrefix + strconv.Itoa(len(replacedBy)) + ":" + replacedBy
	var b strings.Builder
	b.Grow(max(len(head), retiredKeyHeader) + len(key))
	b.WriteString(head)
	for i := len(head); i < retiredKeyHeader; i++ {
		b.WriteByte('.')
	}
	b.WriteString(key)
	return b.String()
}

// ParseRetiredKey reverses RetiredKey: for a key as stored, it returns the
// original key and the job that took it over, and ok == true if stored is
// a retired key; otherwise ok is false.
func ParseRetiredKey(stored string) (key, replacedBy string, ok bool) {
	if len(stored) <= maxNameBytes || !strings.HasPrefix(stored, retiredKeyPrefix) {
		return "", "", false
	}
	rest := stored[len(retiredKeyPrefix):]
	colon := strings.IndexByte(rest, ':')
	if colon < 1 {
		return "", "", false
	}
	n, err := strconv.Atoi(rest[:colon])
	if err != nil || n < 0 || n > len(rest)-colon-1 {
		return "", "", false
	}
	replacedBy = rest[colon+1 : colon+1+n]
	headLen := len(retiredKeyPrefix) + colon + 1 + n
	pad := max(headLen, retiredKeyHeader)
	if len(stored) < pad || strings.Trim(stored[headLen:pad], ".") != "" {
		return "", "", false
	}
	return stored[pad:], replacedBy, true
}

// readKey turns a key as a store holds it into Job.Key and Job.ReplacedBy.
func (j *Job) readKey() {
	if key, by, ok := ParseRetiredKey(j.Key); ok {
		j.Key, j.ReplacedBy = key, by
	}
}

// Check returns the *InputError (matching ErrInvalidInput) with which a
// store's ReplaceJob refuses r, writing nothing: OldID or New.ID empty or
// the same, or From empty, longer than three states, or naming a state
// that is not terminal. Stores call it first.
func (r JobReplacement) Check() error {
	switch {
	case r.OldID == "":
		return invalid("OldID", "empty")
	case r.New.ID == "" || r.New.ID == r.OldID:
		return invalid("New.ID", "empty or the old job's")
	case len(r.From) == 0 || len(r.From) > 3:
		return invalid("From", "%d states; want 1 to 3 terminal states", len(r.From))
	}
	for _, s := range r.From {
		if !s.Terminal() {
			return invalid("From", "%q is not a terminal state", s)
		}
	}
	return nil
}

// Replaced returns the job whose key the job jobID took over: the failed
// or cancelled job that Submit retired, under a KeyReuse policy, to create
// jobID. That job keeps its ID, state, attempts and outcome, its Key is
// still the key, and its ReplacedBy names jobID.
//
// Errors: ErrInvalidInput, ErrNotFound (no job jobID, or it replaced none,
// or the job it replaced was purged), ErrStorage.
func (m *Manager) Replaced(ctx context.Context, jobID string) (Job, error) {
	j, err := m.Get(ctx, jobID)
	if err != nil {
		return Job{}, err
	}
	old, err := m.store.JobByKey(ctx, j.Owner, RetiredKey(j.Key, j.ID))
	if err != nil {
		return Job{}, fmt.Errorf("jobs: the job that job %s replaced: %w", jobID, err)
	}
	return old, nil
}

// reuseInTx refuses a key reuse policy in a caller's transaction. Retiring
// a key and creating its new job is one transaction of the store's own
// (Store.ReplaceJob); in the caller's, the old job's row would stay locked
// until the caller commits, under isolation rules the store does not
// choose, so the stores offer no such variant.
func reuseInTx(req SubmitRequest) error {
	if req.Reuse != KeyReuseNever {
		return invalid("Reuse", "%s: a key is reused by Submit, not in a transaction of the caller's", req.Reuse)
	}
	return nil
}
