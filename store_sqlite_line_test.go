package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lineStore is a store on a new file with a table t of its own, which
// records the size of every batch its line commits.
type lineStore struct {
	*SQLiteStore
	mu      sync.Mutex
	batches []int
}

func openLineStore(t *testing.T) *lineStore {
	t.Helper()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ls := &lineStore{SQLiteStore: s}
	s.onBatch = func(n int) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.batches = append(ls.batches, n)
	}
	for _, q := range []string{
		`CREATE TABLE t (n INTEGER PRIMARY KEY)`,
		`CREATE TABLE c (n INTEGER REFERENCES t (n))`,
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

func (ls *lineStore) sizes() []int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return slices.Clone(ls.batches)
}

// rows returns the numbers stored in t, read through the read pool.
func (ls *lineStore) rows(t *testing.T) []int {
	t.Helper()
	rows, err := ls.rdb.QueryContext(context.Background(), `SELECT n FROM t ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ns []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ns
}

// waiting returns how many transactions wait in the store's line.
func (ls *lineStore) waiting() int {
	ls.line.mu.Lock()
	defer ls.line.mu.Unlock()
	return len(ls.line.waiting)
}

// hold runs a transaction that holds the write turn until release is
// called, and returns once it holds it.
func (ls *lineStore) hold(t *testing.T) (release func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- ls.inTx(context.Background(), "hold", func(ctx context.Context, st sqliteConnStatements) error {
			close(in)
			<-out
			return nil
		})
	}()
	<-in
	return func() {
		close(out)
		if err := <-done; err != nil {
			t.Errorf("the transaction holding the turn: %v", err)
		}
	}
}

// queue starts one inTx per fn, in order, each once the one before waits
// in line, and returns their errors once all have returned.
func (ls *lineStore) queue(t *testing.T, ctxs []context.Context, fns []func(context.Context, sqliteConnStatements) error) func() []error {
	t.Helper()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		ctx := context.Background()
		if ctxs != nil && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		wg.Go(func() { errs[i] = ls.inTx(ctx, fmt.Sprint("tx ", i), fn) })
		waitFor(t, func() bool { return ls.waiting() == i+1 })
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

func insert(n int) func(context.Context, sqliteConnStatements) error {
	return func(ctx context.Context, st sqliteConnStatements) error {
		_, err := st.exec(ctx, `INSERT INTO t (n) VALUES (?1)`, n)
		return err
	}
}

var errRefused = errors.New("refused by the transaction itself")

// The transactions of inTx that wait for the turn together are committed
// together, and each keeps its own outcome: one that fails, by its own
// error or by SQLite's, is rolled back to its savepoint while the others
// commit; a failed commit or a transaction SQLite rolled back whole leaves
// nothing of any of them, and each caller gets an error; a caller whose
// ctx ends while it waits writes nothing; one whose ctx ends while its
// transaction runs has it committed.
func TestSQLiteLineCommitsTogether(t *testing.T) {
	t.Parallel()
	type want struct {
		errs    []string // "" for none; else a word the error says
		rows    []int
		batches []int
	}
	cases := []struct {
		name string
		// fns are queued behind a transaction that holds the turn;
		// cancel[i] cancels fn i's ctx, before release (in line) or
		// by the function itself.
		fns    func(cancel []context.CancelFunc) []func(context.Context, sqliteConnStatements) error
		inLine []int // the transactions whose ctx ends while they wait in line
		want   want
	}{
		{
			name: "each in its savepoint",
			fns: func([]context.CancelFunc) []func(context.Context, sqliteConnStatements) error {
				return []func(context.Context, sqliteConnStatements) error{
					insert(1),
					func(ctx context.Context, st sqliteConnStatements) error {
						if err := insert(2)(ctx, st); err != nil {
							return err
						}
						return errRefused // after its write: rolled back
					},
					insert(3),
					insert(1), // the primary key refuses it: this statement fails, the others stand
					func(ctx context.Context, st sqliteConnStatements) error {
						// It sees what the transactions before it wrote, as if they had committed.
						var n int
						if err := st.queryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
							return err
						}
						return insert(10+n)(ctx, st)
					},
				}
			},
			want: want{errs: []string{"", "refused", "", "UNIQUE", ""}, rows: []int{1, 3, 12}, batches: []int{1, 5}},
		},
		{
			name: "commit refused",
			fns: func([]context.CancelFunc) []func(context.Context, sqliteConnStatements) error {
				return []func(context.Context, sqliteConnStatements) error{
					insert(1),
					func(ctx context.Context, st sqliteConnStatements) error {
						// A foreign key checked at COMMIT, which refuses the whole transaction.
						if _, err := st.exec(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
							return err
						}
						_, err := st.exec(ctx, `INSERT INTO c (n) VALUES (999)`)
						return err
					},
					insert(3),
				}
			},
			want: want{errs: []string{"FOREIGN KEY", "FOREIGN KEY", "FOREIGN KEY"}, batches: []int{1, 3}},
		},
		{
			name: "rolled back whole by SQLite",
			fns: func([]context.CancelFunc) []func(context.Context, sqliteConnStatements) error {
				return []func(context.Context, sqliteConnStatements) error{
					insert(1),
					func(ctx context.Context, st sqliteConnStatements) error {
						// What SQLite does on its own after some I/O errors, a full disk or no memory.
						if _, err := st.exec(ctx, `ROLLBACK`); err != nil {
							return err
						}
						return errRefused
					},
					insert(3),
				}
			},
			want: want{errs: []string{"rolled back with", "refused", "rolled back with"}, batches: []int{1, 3}},
		},
		{
			name: "ctx ends in line",
			fns: func(cancel []context.CancelFunc) []func(context.Context, sqliteConnStatements) error {
				return []func(context.Context, sqliteConnStatements) error{insert(1), insert(2), insert(3)}
			},
			inLine: []int{1},
			// Gone from the line before the batch is taken: not written.
			want: want{errs: []string{"", "canceled", ""}, rows: []int{1, 3}, batches: []int{1, 2}},
		},
		{
			name: "ctx ends in its own transaction",
			fns: func(cancel []context.CancelFunc) []func(context.Context, sqliteConnStatements) error {
				return []func(context.Context, sqliteConnStatements) error{
					insert(1),
					func(ctx context.Context, st sqliteConnStatements) error {
						cancel[1]()
						return insert(2)(ctx, st)
					},
					func(ctx context.Context, st sqliteConnStatements) error {
						cancel[1]() // ended after its transaction ran: committed all the same
						return insert(3)(ctx, st)
					},
				}
			},
			want: want{errs: []string{"", "", ""}, rows: []int{1, 2, 3}, batches: []int{1, 3}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ls := openLineStore(t)
			release := ls.hold(t)
			ctxs := make([]context.Context, 3)
			cancel := make([]context.CancelFunc, 5)
			for i := range cancel {
				if i < len(ctxs) {
					ctxs[i], cancel[i] = context.WithCancel(context.Background())
				} else {
					cancel[i] = func() {}
				}
			}
			fns := tc.fns(cancel)
			if len(fns) > len(ctxs) {
				ctxs = append(ctxs, make([]context.Context, len(fns)-len(ctxs))...)
			}
			wait := ls.queue(t, ctxs[:len(fns)], fns)
			for _, i := range tc.inLine {
				cancel[i]()
				waitFor(t, func() bool { return ls.waiting() == len(fns)-1 })
			}
			release()
			errs := wait()
			for i, err := range errs {
				w := tc.want.errs[i]
				switch {
				case w == "" && err != nil:
					t.Errorf("tx %d: %v, want no error", i, err)
				case w != "" && (err == nil || !containsFold(err.Error(), w)):
					t.Errorf("tx %d: %v, want an error saying %q", i, err, w)
				}
			}
			if diff := cmp.Diff(tc.want.rows, ls.rows(t)); diff != "" {
				t.Errorf("rows in t (-want +got):\n%s", diff)
			}
			if tc.want.batches != nil {
				if diff := cmp.Diff(tc.want.batches, ls.sizes()); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
			}
			// The store writes on after it.
			if err := ls.inTx(context.Background(), "after", insert(100)); err != nil {
				t.Fatalf("a write after: %v", err)
			}
			if rows := ls.rows(t); !slices.Contains(rows, 100) {
				t.Fatalf("the write after is not stored: %v", rows)
			}
			for _, err := range errs {
				var se *StorageError
				if err != nil && !errors.Is(err, errRefused) && !errors.Is(err, context.Canceled) && !errors.As(err, &se) &&
					!containsFold(err.Error(), "UNIQUE") {
					t.Errorf("an error of no kind a caller can tell: %T %v", err, err)
				}
			}
		})
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// A leader that gives up before its transaction begins (its ctx ends
// while the writer connection is held elsewhere) leaves the line to the
// next writer, which writes.
func TestSQLiteLineLeaderGivesUp(t *testing.T) {
	t.Parallel()
	ls := openLineStore(t)
	ctx := context.Background()
	conn, err := ls.DB().Conn(ctx) // the one writer connection
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- ls.inTx(short, "first", insert(1)) }()
	waitFor(t, func() bool { return ls.waiting() == 1 })
	second := make(chan error, 1)
	go func() { second <- ls.inTx(ctx, "second", insert(2)) }()
	waitFor(t, func() bool { return ls.waiting() == 2 })
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the leader whose ctx ended: %v, want context.DeadlineExceeded", err)
	}
	conn.Close()
	if err := <-second; err != nil {
		t.Errorf("the next writer: %v", err)
	}
	if diff := cmp.Diff([]int{2}, ls.rows(t)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// Store calls batched together keep every guarantee: attempts started at
// once on one job, behind a held turn so that they run in one batch, leave
// one attempt in doubt and a count that matches the attempts stored (the
// refused ones' guard is rolled back with their savepoint); the two
// attempts of a hedged job completed in one batch have one winner.
func TestSQLiteLineKeepsTheGuarantees(t *testing.T) {
	t.Parallel()
	ls := openLineStore(t)
	ctx := context.Background()
	now := time.Now()
	j, _, err := ls.CreateJob(ctx, Job{ID: newID("t_", now), Owner: "o", Key: "k", Kind: "k", Provider: "p",
		Params: json.RawMessage(`{}`), Fingerprint: "f", State: JobPending, Version: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	const starts = 8
	release := ls.hold(t)
	errs := make([]error, starts)
	var wg sync.WaitGroup
	for i := range starts {
		wg.Go(func() {
			_, errs[i] = ls.CreateAttempt(ctx, NewAttempt{ID: newID("t_", now), JobID: j.ID, At: now})
		})
	}
	waitFor(t, func() bool { return ls.waiting() == starts })
	release()
	wg.Wait()
	started := 0
	for _, err := range errs {
		switch {
		case err == nil:
			started++
		case !errors.Is(err, ErrAttemptInFlight):
			t.Errorf("start: %v, want ErrAttemptInFlight", err)
		}
	}
	if started != 1 {
		t.Errorf("%d attempts started, want 1", started)
	}
	if got := ls.sizes(); !slices.Contains(got, starts) {
		t.Errorf("batches %v: the %d starts did not run together", got, starts)
	}
	stored, err := ls.Attempts(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = ls.Job(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || j.Attempts != 1 {
		t.Fatalf("%d attempts stored, job counts %d; want 1 and 1", len(stored), j.Attempts)
	}

	// A hedge, both running, completed at once in one batch.
	ids := []string{stored[0].ID, ""}
	for i := range ids {
		if ids[i] == "" {
			hedge, err := ls.CreateAttempt(ctx, NewAttempt{ID: newID("t_", now), JobID: j.ID, Hedge: true, At: now})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = hedge.ID
		}
		if _, err := ls.UpdateAttempt(ctx, AttemptUpdate{ID: ids[i], From: []AttemptState{AttemptStarting}, To: AttemptRunning, At: now}); err != nil {
			t.Fatal(err)
		}
	}
	release = ls.hold(t)
	type outcome struct {
		job Job
		a   Attempt
		err error
	}
	out := make([]outcome, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			j, a, err := ls.CompleteAttempt(ctx, Completion{AttemptID: id, Result: json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)), At: now})
			out[i] = outcome{j, a, err}
		})
	}
	waitFor(t, func() bool { return ls.waiting() == len(ids) })
	release()
	wg.Wait()
	wins := 0
	for i, o := range out {
		switch {
		case o.err == nil:
			wins++
			if o.job.CompletedBy != ids[i] || o.a.State != AttemptSucceeded {
				t.Errorf("winner %s: job completed by %s, attempt %s", ids[i], o.job.CompletedBy, o.a.State)
			}
		case !errors.Is(o.err, ErrLostRace):
			t.Errorf("complete %s: %v, want ErrLostRace", ids[i], o.err)
		}
	}
	if wins != 1 {
		t.Errorf("%d winners, want 1", wins)
	}
	if j, err = ls.Job(ctx, j.ID); err != nil || j.State != JobSucceeded {
		t.Fatalf("job: %v %v, want succeeded", j.State, err)
	}
}

// TestSQLiteCreateJobsWaitingTogetherCommitTogether holds the write turn
// while new keys, and a key already taken, are submitted: they wait in the
// line and are committed in one batch, each with its own outcome (the new
// keys created with their own IDs, the taken key returning its job).
func TestSQLiteCreateJobsWaitingTogetherCommitTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ls := openLineStore(t)
	newJob := func(key string) Job {
		now := time.Now().UTC().Truncate(time.Microsecond)
		return Job{ID: newID(jobPrefix, now), Owner: "o", Key: key, Kind: "charge", Provider: "psp",
			Params: json.RawMessage(`{"k":"` + key + `"}`), Fingerprint: "f-" + key, State: JobPending, Version: 1,
			CreatedAt: now, UpdatedAt: now}
	}
	taken, created, err := ls.CreateJob(ctx, newJob("taken"))
	if err != nil || !created {
		t.Fatalf("first job: created %v, %v", created, err)
	}
	// Keys new in a row: CreateJob goes straight to the insert, which
	// finds the taken key in line.
	for i := 1; i < keyStreakLength; i++ {
		if _, created, err := ls.CreateJob(ctx, newJob(fmt.Sprint("before-", i))); err != nil || !created {
			t.Fatalf("job %d: created %v, %v", i, created, err)
		}
	}
	release := ls.hold(t)
	const n = 8
	want := make([]Job, n)
	got := make([]Job, n)
	wasCreated := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		want[i] = newJob(fmt.Sprint("new-", i))
		if i == n-1 {
			want[i] = newJob("taken")
		}
		wg.Go(func() { got[i], wasCreated[i], errs[i] = ls.CreateJob(ctx, want[i]) })
	}
	waitFor(t, func() bool { return ls.waiting() == n })
	release()
	wg.Wait()
	if sizes := ls.sizes(); !slices.Contains(sizes, n) {
		t.Errorf("batches of %v, want one of %d", sizes, n)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("CreateJob %d: %v", i, errs[i])
		}
		wantJob, wantCreated := want[i], true
		if i == n-1 {
			wantJob, wantCreated = taken, false
		}
		if wasCreated[i] != wantCreated {
			t.Errorf("CreateJob %d: created %v, want %v", i, wasCreated[i], wantCreated)
		}
		if diff := cmp.Diff(wantJob, got[i]); diff != "" {
			t.Errorf("CreateJob %d returned (-want +got):\n%s", i, diff)
		}
		stored, err := ls.JobByKey(ctx, "o", wantJob.Key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantJob, stored); diff != "" {
			t.Errorf("job %d as stored (-want +got):\n%s", i, diff)
		}
	}
}
