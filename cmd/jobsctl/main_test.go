package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// binary is the jobsctl built for the tests, which run it as a user would.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jobsctl-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "jobsctl")
	// Built as this test binary was (with -race or not), so that the build
	// reuses the packages the test's own build just compiled instead of
	// compiling every dependency, cgo's SQLite included, a second time.
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build jobsctl: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	code = testdb.AfterTests(code)
	os.Exit(code)
}

// quickRaceExit is the environment entry that keeps a binary built with
// -race from sleeping a second before it exits (the race detector's
// atexit_sleep_ms, 1000 by default, which gives other threads time to
// report): the tests run the binary a hundred times.
var quickRaceExit = "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// jobsctl runs the binary with args, and JOBS_DSN unset unless env sets it.
func jobsctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return jobsctlIn(t, "", env, args...)
}

// jobsctlIn runs the binary as jobsctl does, in the directory dir.
func jobsctlIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), quickRaceExit}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run jobsctl %v: %v", args, err)
	}
	return r
}

// want checks the exit code and that each of the strings is in stdout.
func (r result) want(t *testing.T, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range contains {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
}

// libraryPrefix finds the library's "jobs: " prefix in an error line, where
// jobsctl's own prefix should be the only one.
var libraryPrefix = regexp.MustCompile(`(^|: )jobs: `)

// wantError checks a failure: the exit code, nothing on stdout, and one
// line on stderr, with one prefix, that contains the given text and no
// stack trace.
func (r result) wantError(t *testing.T, code int, contains string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty on error: %q", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "jobsctl: ") || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not one line starting with \"jobsctl: \": %q", r.stderr)
	}
	if libraryPrefix.MatchString(strings.TrimPrefix(r.stderr, "jobsctl: ")) {
		t.Errorf("stderr %q has a prefix after \"jobsctl: \"", r.stderr)
	}
	if !strings.Contains(r.stderr, contains) {
		t.Errorf("stderr %q does not mention %q", r.stderr, contains)
	}
	if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stack trace on stderr: %q", r.stderr)
	}
}

// seeded is the history written by seed.
type seeded struct {
	raced, primary, hedge jobs.Job
	rPrimary, rHedge      jobs.Attempt
	doubt                 jobs.Job
	unknown               jobs.Attempt
	old                   jobs.Job
}

// seed writes a small history: a job whose hedge won a race against the
// primary attempt, a job whose attempt timed out into unknown, and a job
// closed two days ago.
func seed(t *testing.T, s jobs.Store) seeded {
	t.Helper()
	ctx := context.Background()
	clk := jobstest.NewClock(time.Now().UTC().Add(-50 * time.Hour).Truncate(time.Second))
	m, err := jobs.New(s, jobs.Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var h seeded
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	submit := func(key string) jobs.Job {
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "user-7", Key: key, Kind: "charge", Provider: "stripe",
			Params: json.RawMessage(`{"amount":1200,"currency":"eur"}`)})
		check(err)
		return j
	}
	h.old = submit("order-41")
	_, err = m.CancelJob(ctx, h.old.ID, "customer changed their mind")
	check(err)

	clk.Advance(48 * time.Hour)
	h.raced = submit("order-42")
	clk.Advance(15 * time.Millisecond)
	h.rPrimary, err = m.StartAttempt(ctx, h.raced.ID, "")
	check(err)
	clk.Advance(120 * time.Millisecond)
	_, err = m.MarkRunning(ctx, h.rPrimary.ID, "ch_primary")
	check(err)
	clk.Advance(10 * time.Second)
	h.rHedge, err = m.StartAttempt(ctx, h.raced.ID, "", jobs.Hedge())
	check(err)
	clk.Advance(800 * time.Millisecond)
	_, err = m.Complete(ctx, h.rHedge.ID, json.RawMessage(`{"charge":"ch_hedge"}`))
	check(err)
	clk.Advance(2 * time.Second)
	if _, err := m.Complete(ctx, h.rPrimary.ID, json.RawMessage(`{"charge":"ch_primary"}`)); !errors.Is(err, jobs.ErrLostRace) {
		t.Fatalf("late complete: %v", err)
	}

	clk.Advance(time.Minute)
	h.doubt = submit("order-43")
	h.unknown, err = m.StartAttempt(ctx, h.doubt.ID, "")
	check(err)
	clk.Advance(30 * time.Second)
	_, err = m.MarkUnknown(ctx, h.unknown.ID, "no answer after 30s")
	check(err)
	return h
}

// database is a store the CLI is tested on: the flags that name it, and a
// store to seed it through.
type database struct {
	name  string // the dialect
	flags []string
	store jobs.SQLStore
}

// databases are the stores the CLI is tested on, one of each dialect.
func databases(t *testing.T) []database {
	path := filepath.Join(t.TempDir(), "jobs.db")
	sqlite := testdb.NewSQLiteAt(t, path)
	dsn := testdb.PostgresDSN(t)
	pg, err := jobs.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	pg.DB().SetMaxOpenConns(4)
	t.Cleanup(func() { pg.Close() })
	return []database{
		{"sqlite", []string{"--sqlite", path}, sqlite},
		{"postgres", []string{"--postgres", dsn}, pg},
	}
}

// args is a jobsctl command line on the database.
func (db database) args(a ...string) []string {
	return append(append([]string{}, db.flags...), a...)
}

// placeholder is a PostgreSQL parameter, written ? for SQLite.
var placeholder = regexp.MustCompile(`\$\d+`)

// exec runs a statement behind the library's back, written with $1
// placeholders whichever the dialect.
func (db database) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if db.name == "sqlite" {
		query = placeholder.ReplaceAllString(query, "?")
	}
	if _, err := db.store.DB().Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// failUnderOpenAttempt breaks an invariant: the job is failed while its
// attempt is still open, which the library never does.
func (db database) failUnderOpenAttempt(t *testing.T, jobID string) {
	t.Helper()
	db.exec(t, `UPDATE intentjobs_jobs SET state = 'failed', version = version + 1, closed_at = updated_at WHERE id = $1`, jobID)
}

func TestShow(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			h := seed(t, db.store)

			r := jobsctl(t, nil, db.args("show", h.raced.ID)...)
			r.want(t, 0,
				"state            succeeded (version 2)",
				"won by           attempt 2 ("+h.rHedge.ID+")",
				"attempt 1 started on stripe",
				"attempt 2 started on stripe (hedge)",
				"attempt 2 won after 800ms",
				"attempt 1 lost to attempt 2 ("+h.rHedge.ID+") [ref ch_primary] after 12.92s: result dropped",
				"job succeeded, won by attempt 2 ("+h.rHedge.ID+")",
				"lost to attempt 2 ("+h.rHedge.ID+"): result dropped",
				`{"charge":"ch_hedge"}`,
			)
			if strings.Contains(r.stdout, "ch_primary\"") {
				t.Error("the loser's result is shown: it must be stored nowhere")
			}
			// By attempt ID, and by owner and key, with the flags after the command.
			jobsctl(t, nil, append([]string{"show", h.rPrimary.ID}, db.flags...)...).want(t, 0, h.raced.ID)
			jobsctl(t, nil, db.args("show", "--owner", "user-7", "--key", "order-42")...).want(t, 0, h.raced.ID)

			r = jobsctl(t, nil, db.args("--json", "show", h.raced.ID)...)
			r.want(t, 0)
			var got struct {
				Job      jobs.Job
				Attempts []jobs.Attempt
				Timeline []struct {
					What   string
					Offset time.Duration `json:"offset_ns"`
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("show --json: %v\n%s", err, r.stdout)
			}
			if got.Job.CompletedBy != h.rHedge.ID || len(got.Attempts) != 2 || got.Attempts[0].State != jobs.AttemptLost || len(got.Timeline) != 6 {
				t.Errorf("show --json = %+v", got)
			}
			if last := got.Timeline[len(got.Timeline)-1]; last.Offset != 12935*time.Millisecond {
				t.Errorf("last step %q at +%v, want +12.935s", last.What, last.Offset)
			}

			jobsctl(t, nil, db.args("show", "job_nope")...).wantError(t, 1, "not found")
		})
	}
}

// show names both jobs of a key reused after a failure: the failed job
// the one that took its key over, and that one the job it replaced.
func TestShowReplaced(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m, err := jobs.New(db.store, jobs.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			r := jobs.SubmitRequest{Owner: "user-7", Key: "order-50", Kind: "charge", Provider: "stripe",
				Params: json.RawMessage(`{"amount":1200}`), Reuse: jobs.KeyReuseAfterFailure}
			old, _, err := m.Submit(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.FailJob(ctx, old.ID, "card declined"); err != nil {
				t.Fatal(err)
			}
			n, created, err := m.Submit(ctx, r)
			if err != nil || !created {
				t.Fatalf("Submit with key reuse = %v, %v", created, err)
			}
			jobsctl(t, nil, db.args("show", old.ID)...).want(t, 0, "user-7 / order-50", "replaced by      job "+n.ID)
			byKey := jobsctl(t, nil, db.args("show", "--owner", "user-7", "--key", "order-50")...)
			byKey.want(t, 0, n.ID, "replaces         job "+old.ID)
			if strings.Contains(byKey.stdout, "replaced by") {
				t.Errorf("the new job is shown as replaced:\n%s", byKey.stdout)
			}
			var got struct {
				Job      jobs.Job
				Replaces string
			}
			js := jobsctl(t, nil, db.args("--json", "show", n.ID)...)
			js.want(t, 0)
			if err := json.Unmarshal([]byte(js.stdout), &got); err != nil || got.Replaces != old.ID || got.Job.Key != "order-50" {
				t.Errorf("show --json = %+v, %v; want replaces %s", got, err, old.ID)
			}
			// The invariant checker sees no duplicate key.
			jobsctl(t, nil, db.args("check")...).want(t, 0)
		})
	}
}

func TestStaleCancelCheckPurgeSchema(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			h := seed(t, db.store)

			// stale: the unknown attempt, of any age.
			jobsctl(t, nil, db.args("stale")...).want(t, 0, h.unknown.ID, "unknown", "no answer after 30s")
			r := jobsctl(t, nil, db.args("stale", "--json", "--older-than", "1h")...)
			var stale []jobs.Attempt
			if err := json.Unmarshal([]byte(r.stdout), &stale); err != nil || len(stale) != 1 || stale[0].ID != h.unknown.ID {
				t.Errorf("stale --json = %v, %v\n%s", stale, err, r.stdout)
			}

			// check: a clean database.
			jobsctl(t, nil, db.args("check")...).want(t, 0, "3 jobs and 3 attempts checked: 0 violations")

			// cancel: recorded on the attempt, and it unblocks the job.
			reason := "operator: provider confirms it never received the request"
			jobsctl(t, nil, db.args("cancel", h.unknown.ID, "--reason", reason)...).want(t, 0, "is cancelled: "+reason)
			a, err := db.store.Attempt(context.Background(), h.unknown.ID)
			if err != nil || a.State != jobs.AttemptCancelled || a.Reason != reason {
				t.Errorf("after cancel: %+v, %v", a, err)
			}
			jobsctl(t, nil, db.args("stale")...).want(t, 0, "no attempt unknown")
			// A finished attempt cannot be cancelled.
			jobsctl(t, nil, db.args("cancel", h.rHedge.ID, "--reason", "oops")...).wantError(t, 1, "cannot move from succeeded to cancelled")

			// purge: the job closed two days ago.
			jobsctl(t, nil, db.args("purge", "--dry-run")...).want(t, 0, "would purge 1 job and 0 attempts")
			r = jobsctl(t, nil, db.args("purge", "--json")...)
			var res jobs.PurgeResult
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Jobs != 1 || res.DryRun {
				t.Errorf("purge --json = %+v, %v\n%s", res, err, r.stdout)
			}
			if _, err := db.store.Job(context.Background(), h.old.ID); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("purged job: %v", err)
			}
			jobsctl(t, nil, db.args("purge", "--older-than", "1m", "--force")...).want(t, 0, "purged 1 job and 2 attempts")

			// check finds a broken invariant: a job given up while its attempt runs.
			j2, _, err := jobstest.NewManager(t, db.store, jobs.Options{}).Submit(context.Background(), jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jobstest.NewManager(t, db.store, jobs.Options{}).StartAttempt(context.Background(), j2.ID, ""); err != nil {
				t.Fatal(err)
			}
			db.failUnderOpenAttempt(t, j2.ID)
			r = jobsctl(t, nil, db.args("check")...)
			r.want(t, 1, "failed-job-idle", j2.ID, "1 violations")
			r = jobsctl(t, nil, db.args("check", "--json")...)
			var rep struct{ Violations []invariant.Violation }
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Violations) != 1 || r.code != 1 {
				t.Errorf("check --json = %+v, %v, exit %d", rep, err, r.code)
			}

			// schema: up to date, then behind, then migrated again.
			last := lastVersion(t, jobs.Dialect(db.name))
			jobsctl(t, nil, db.args("schema")...).want(t, 0, fmt.Sprintf("schema version %d", last), "up to date", "0001_init.sql")
			db.exec(t, `DELETE FROM intentjobs_schema_migrations WHERE version = $1`, last)
			jobsctl(t, nil, db.args("schema")...).want(t, 1, "behind")
			// Other commands refuse a database at another version.
			jobsctl(t, nil, db.args("check")...).wantError(t, 1, "see jobsctl schema")
			r = jobsctl(t, nil, db.args("schema", "--json")...)
			var sr schemaReport
			if err := json.Unmarshal([]byte(r.stdout), &sr); err != nil || sr.Status != "behind" || sr.Database != last-1 || len(sr.Missing) != 1 {
				t.Errorf("schema --json = %+v, %v", sr, err)
			}
		})
	}
}

func TestEnvironmentDSN(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	testdb.NewSQLiteAt(t, path)
	jobsctl(t, []string{"JOBS_DSN=sqlite:" + path}, "schema").want(t, 0, "up to date")
	pg := []string{"JOBS_DSN=" + testdb.PostgresDSN(t)}
	// An empty database: no schema to look at until it is migrated.
	jobsctl(t, pg, "check").wantError(t, 1, "see jobsctl schema")
	jobsctl(t, pg, "schema").want(t, 1, "schema version 0", "behind: 0001_init.sql")
	jobsctl(t, pg, "migrate").want(t, 0, "up to date")
	jobsctl(t, pg, "check").want(t, 0, "0 jobs and 0 attempts checked")
	jobsctl(t, []string{"JOBS_DSN=mysql://x"}, "check").wantError(t, 2, "JOBS_DSN must be")
}

func TestBadArgumentsAndUnreachableDatabases(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	testdb.NewSQLiteAt(t, path)
	missing := filepath.Join(t.TempDir(), "missing.db")
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", []string{"--sqlite", path}, 2, "no command given"},
		{"unknown command", []string{"--sqlite", path, "frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"--sqlite", path, "purge", "--all"}, 2, "flag provided but not defined: -all"},
		{"bad duration", []string{"--sqlite", path, "purge", "--older-than", "soon"}, 2, "invalid value"},
		{"negative retention", []string{"--sqlite", path, "purge", "--older-than", "-1h"}, 2, "must be positive"},
		{"huge batch", []string{"--sqlite", path, "purge", "--batch-size", "1000000"}, 2, "--batch-size must be between 1 and 10000"},
		{"no database", []string{"check"}, 2, "no database"},
		{"two databases", []string{"--sqlite", path, "--postgres", "postgres://x", "check"}, 2, "not both"},
		{"show without ID", []string{"--sqlite", path, "show"}, 2, "show needs"},
		{"show with extra", []string{"--sqlite", path, "show", "a", "b"}, 2, "show needs"},
		{"cancel without reason", []string{"--sqlite", path, "cancel", "att_1"}, 2, "--reason is required"},
		{"check with argument", []string{"--sqlite", path, "check", "now"}, 2, "takes no arguments"},
		{"missing file", []string{"--sqlite", missing, "check"}, 1, "no SQLite database at " + missing},
		{"not a database", []string{"--sqlite", "/etc/hostname", "check"}, 1, "file is not a database"},
		{"unreachable postgres", []string{"--postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5", "check"}, 1, "unavailable"},
		{"bad DSN", []string{"--postgres", "postgres://%zz", "schema"}, 1, "cannot parse"},
		{"cancel unknown attempt", []string{"--sqlite", path, "cancel", "att_nope", "--reason", "x"}, 1, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jobsctl(t, nil, tc.args...).wantError(t, tc.code, tc.msg)
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a look at a missing SQLite file created it: %v", err)
	}
	r := jobsctl(t, nil, "--help")
	r.want(t, 0, "Usage: jobsctl", "stale [--older-than 5m]")
	if r.stderr != "" {
		t.Errorf("--help wrote to stderr: %q", r.stderr)
	}
}
