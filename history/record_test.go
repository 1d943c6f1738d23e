package history_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/memstore"
)

func newSink(t *testing.T, dir string) *history.Sink {
	t.Helper()
	s, err := history.NewSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func load(t *testing.T, dir string) *history.History {
	t.Helper()
	h, err := history.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func request(key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: "tenant", Key: key, Kind: "charge", Provider: "p", Params: json.RawMessage(`{"amount":1}`)}
}

// TestRecordAndLoad drives a Manager over a recorded store through a race
// that two attempts of one job lose and win, and reads back what each
// call asked and was told.
func TestRecordAndLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sink := newSink(t, dir)
	m, err := jobs.New(history.Record(memstore.New(), sink, "caller"), jobs.Options{Hedging: true})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := m.Submit(ctx, request("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Submit(ctx, request("k1")); err != nil {
		t.Fatal(err)
	}
	a1, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.StartAttempt(ctx, j.ID, ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
		t.Fatalf("second StartAttempt: %v; want ErrAttemptInFlight", err)
	}
	if _, err := m.MarkRunning(ctx, a1.ID, "ref-1"); err != nil {
		t.Fatal(err)
	}
	a2, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, a2.ID, json.RawMessage(`{"by":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, a1.ID, json.RawMessage(`{"by":1}`)); !errors.Is(err, jobs.ErrLostRace) {
		t.Fatalf("late Complete: %v; want ErrLostRace", err)
	}
	if _, err := m.Get(ctx, "job_missing"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("Get: %v; want ErrNotFound", err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}

	h := load(t, dir)
	type summary struct {
		method  history.Method
		outcome history.Outcome
	}
	var got []summary
	for _, op := range h.Ops {
		got = append(got, summary{op.Method, op.Outcome})
		if !op.Returned || op.Return < op.Call || op.Client != "caller" || op.Process != sink.Process() {
			t.Errorf("op %d: returned %v, call %d, return %d, client %q, process %q", op.Seq, op.Returned, op.Call, op.Return, op.Client, op.Process)
		}
	}
	want := []summary{
		{history.CreateJob, history.OK},
		{history.CreateJob, history.OK},
		{history.CreateAttempt, history.OK},
		{history.CreateAttempt, history.Refused},
		{history.UpdateAttempt, history.OK},
		{history.CreateAttempt, history.OK},
		{history.CompleteAttempt, history.OK},
		{history.CompleteAttempt, history.Refused},
		{history.Job, history.Refused},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recorded %v;\nwant %v", got, want)
	}
	create, replay := h.Ops[0], h.Ops[1]
	if create.Args.Job == nil || create.Args.Job.Key != "k1" || string(create.Args.Job.Params) != `{"amount":1}` {
		t.Errorf("CreateJob args = %+v", create.Args.Job)
	}
	if !create.Results.Created || replay.Results.Created || replay.Results.Job == nil || replay.Results.Job.ID != j.ID {
		t.Errorf("CreateJob results: first created %v, replay created %v job %+v", create.Results.Created, replay.Results.Created, replay.Results.Job)
	}
	refused := h.Ops[3].Error
	if refused == nil || refused.Sentinel != "ErrAttemptInFlight" || refused.InFlight == nil || refused.InFlight.AttemptID != a1.ID {
		t.Errorf("refused CreateAttempt recorded %+v", refused)
	}
	lost := h.Ops[7]
	if lost.Error == nil || lost.Error.LostRace == nil || lost.Error.LostRace.WinnerID != a2.ID {
		t.Errorf("lost race recorded %+v", lost.Error)
	}
	if lost.Results.Attempt == nil || lost.Results.Attempt.State != jobs.AttemptLost || lost.Results.Job == nil || lost.Results.Job.CompletedBy != a2.ID {
		t.Errorf("lost race results %+v", lost.Results)
	}
	if err := lost.Error.Err(); !errors.Is(err, jobs.ErrLostRace) {
		t.Errorf("rebuilt error %v does not match ErrLostRace", err)
	}
	if c := lost.Args.Completion; c == nil || c.AttemptID != a1.ID || string(c.Result) != `{"by":1}` {
		t.Errorf("CompleteAttempt args = %+v", c)
	}
	if e := h.Ops[8].Error; e == nil || e.Sentinel != "ErrNotFound" || !errors.Is(e.Err(), jobs.ErrNotFound) {
		t.Errorf("Job not found recorded %+v", e)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err      error
		want     history.Outcome
		sentinel string
	}{
		{nil, history.OK, ""},
		{fmt.Errorf("x: %w", jobs.ErrNotFound), history.Refused, "ErrNotFound"},
		{&jobs.KeyConflictError{JobID: "j"}, history.Refused, "ErrKeyConflict"},
		{&jobs.AttemptInFlightError{}, history.Refused, "ErrAttemptInFlight"},
		{&jobs.JobClosedError{}, history.Refused, "ErrJobClosed"},
		{&jobs.TransitionError{}, history.Refused, "ErrInvalidTransition"},
		{&jobs.LostRaceError{WinnerID: "w"}, history.Refused, "ErrLostRace"},
		{fmt.Errorf("claim: %w", jobs.ErrClaimLost), history.Refused, "ErrClaimLost"},
		{&jobs.InputError{Field: "Key"}, history.Refused, "ErrInvalidInput"},
		{&jobs.StorageError{Op: "x", Kind: jobs.StorageBusy}, history.Ambiguous, "ErrStorage"},
		{context.Canceled, history.Ambiguous, "context.Canceled"},
		{fmt.Errorf("w: %w", context.DeadlineExceeded), history.Ambiguous, "context.DeadlineExceeded"},
		// A storage error that also claims a refusal is not definite.
		{errors.Join(jobs.ErrNotFound, &jobs.StorageError{Kind: jobs.StorageUnavailable}), history.Ambiguous, "ErrStorage"},
		{errors.ErrUnsupported, history.Ambiguous, "errors.ErrUnsupported"},
		{errors.New("driver: bad connection"), history.Ambiguous, ""},
		{jobs.ErrProviderUnverified, history.Ambiguous, ""},
	} {
		if got := history.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s; want %s", tc.err, got, tc.want)
		}
	}
}

// TestConcurrentClients records many clients of one process, through
// faults that leave writes ambiguous, and finds every call and answer.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sink := newSink(t, dir)
	faulty := faultstore.New(memstore.New(), faultstore.Config{Seed: 7, Rate: 0.2, AfterShare: 0.5})
	const clients, rounds = 16, 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[history.Outcome]int{}
	for c := range clients {
		s := history.Record(faulty, sink, fmt.Sprintf("client-%d", c))
		wg.Go(func() {
			for i := range rounds {
				_, _, err := s.CreateJob(ctx, jobs.Job{ID: fmt.Sprintf("job_%d_%d", c, i), Owner: "o", Key: fmt.Sprint(i % 3),
					Kind: "k", Provider: "p", Params: json.RawMessage(`{}`), CreatedAt: time.Now()})
				mu.Lock()
				counts[history.Classify(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	h := load(t, dir)
	if len(h.Ops) != clients*rounds {
		t.Fatalf("loaded %d ops; want %d", len(h.Ops), clients*rounds)
	}
	got := map[history.Outcome]int{}
	for i, op := range h.Ops {
		got[op.Outcome]++
		if !op.Returned {
			t.Errorf("op %d has no return", op.Seq)
		}
		if i > 0 && op.Call < h.Ops[i-1].Call {
			t.Fatalf("ops not in call order at %d", i)
		}
		if op.Outcome == history.Ambiguous && (op.Error == nil || op.Error.Storage == nil) {
			t.Errorf("ambiguous op %d without its storage error: %+v", op.Seq, op.Error)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(counts) || got[history.Ambiguous] == 0 {
		t.Errorf("outcomes loaded %v; the callers saw %v (want some ambiguous)", got, counts)
	}
}

// blockingStore blocks CreateAttempt until its process is killed.
type blockingStore struct{ *memstore.Store }

func (blockingStore) CreateAttempt(context.Context, jobs.NewAttempt) (jobs.Attempt, error) {
	select {}
}

const envKilledChild = "HISTORY_TEST_KILLED_CHILD"

// TestKilledProcess records in a child process that is killed (SIGKILL)
// while a call is in the store: the history holds the call, with no
// return, as ambiguous, and the calls before it whole.
func TestKilledProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestKilledChild$")
	cmd.Env = append(os.Environ(), envKilledChild+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if sc.Text() == "blocked" {
			ready = true
			break
		}
	}
	if !ready {
		cmd.Wait()
		t.Fatal("the child did not reach the blocking call")
	}
	time.Sleep(50 * time.Millisecond) // into the blocking call
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	// A process killed in the middle of a line leaves it cut short.
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("%d files; want 1", len(files))
	}
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"ev":"return","op":2,"ti`)
	f.Close()

	h := load(t, dir)
	if len(h.Ops) != 2 {
		t.Fatalf("loaded %d ops; want 2", len(h.Ops))
	}
	created, killed := h.Ops[0], h.Ops[1]
	if created.Method != history.CreateJob || !created.Returned || created.Outcome != history.OK {
		t.Errorf("first op %+v", created)
	}
	if killed.Method != history.CreateAttempt || killed.Returned || killed.Outcome != history.Ambiguous || killed.Return != 0 {
		t.Errorf("killed op: method %s, returned %v, outcome %s", killed.Method, killed.Returned, killed.Outcome)
	}
	if killed.Args.NewAttempt == nil || killed.Args.NewAttempt.JobID != created.Results.Job.ID {
		t.Errorf("killed op's args %+v", killed.Args)
	}
}

// TestKilledChild is the child of TestKilledProcess; it does nothing in a
// normal run.
func TestKilledChild(t *testing.T) {
	dir := os.Getenv(envKilledChild)
	if dir == "" {
		t.Skip("the child of TestKilledProcess")
	}
	sink, err := history.NewSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := jobs.New(history.Record(blockingStore{memstore.New()}, sink, "doomed"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := m.Submit(context.Background(), request("k"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("blocked")
	m.StartAttempt(context.Background(), j.ID, "")
}

// TestLoadRejects refuses files that are not histories, and finds runs.
func TestLoadRejects(t *testing.T) {
	t.Parallel()
	header := `{"format":"jobs-history/1","process":"p","host":"h","pid":1,"started":1}` + "\n"
	call := `{"ev":"call","op":1,"client":"c","method":"Job","time":10,"args":{"id":"j"}}` + "\n"
	for name, content := range map[string]string{
		"wrong format":      `{"format":"other"}` + "\n",
		"second header":     header + header,
		"unmatched return":  header + `{"ev":"return","op":9,"time":1,"outcome":"ok"}` + "\n",
		"return before":     header + call + `{"ev":"return","op":1,"time":5,"outcome":"ok"}` + "\n",
		"double return":     header + call + `{"ev":"return","op":1,"time":11,"outcome":"ok"}` + "\n" + `{"ev":"return","op":1,"time":12,"outcome":"ok"}` + "\n",
		"unknown outcome":   header + call + `{"ev":"return","op":1,"time":11,"outcome":"maybe"}` + "\n",
		"garbage mid-file":  header + "not json\n" + call,
		"neither":           header + `{"ev":"other"}` + "\n",
		"call of op called": header + call + call,
	} {
		dir := filepath.Join(t.TempDir(), "run")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(content), 0o644)
		if _, err := history.Load(dir); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
	}
	root := t.TempDir()
	if _, err := history.Load(root); err == nil || !strings.Contains(err.Error(), "no *.jsonl") {
		t.Errorf("Load of an empty directory: %v", err)
	}
	for _, name := range []string{"TestA/sub", "TestB"} {
		dir, err := history.RunDir(root, name)
		if err != nil {
			t.Fatal(err)
		}
		sink, err := history.NewSink(dir)
		if err != nil {
			t.Fatal(err)
		}
		sink.Close()
	}
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	runs, err := history.Runs(root)
	if err != nil || len(runs) != 2 || !strings.Contains(runs[0], "TestA_sub-") || !strings.Contains(runs[1], "TestB-") {
		t.Errorf("Runs = %v, %v", runs, err)
	}
}

// TestRecordSQLite records a Manager over SQLite, a store with a
// transaction capability: SubmitTx is recorded as CreateJobTx.
func TestRecordSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sink := newSink(t, dir)
	inner := testdb.NewSQLite(t)
	s := history.Record(inner, sink, "tx-caller")
	if _, ok := s.(jobs.TxStore); !ok {
		t.Fatal("recorded SQLite store is no TxStore")
	}
	if _, ok := s.(jobs.CloseNotifier); ok {
		t.Fatal("recorded SQLite store is a CloseNotifier; SQLite's is not")
	}
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := inner.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, created, err := m.SubmitTx(ctx, tx, request("tx"))
	if err != nil || !created {
		t.Fatalf("SubmitTx = %v, %v", created, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	sink.Close()
	h := load(t, dir)
	if len(h.Ops) != 2 || h.Ops[0].Method != history.CreateJobTx || h.Ops[1].Method != history.Job || h.Ops[1].Results.Job.ID != j.ID {
		t.Errorf("recorded %+v", h.Ops)
	}
}
