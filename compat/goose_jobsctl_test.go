package compat

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/intentjobs/jobs"
)

// TestGooseThenJobsctlMigrate: goose applies the first migrations, as a
// user who manages jobs' schema with goose does; then `jobsctl migrate`
// refuses to apply the rest behind goose's back (goose would run them
// again), and says to use goose; goose then applies the rest, and both
// records agree. While the library has a single migration there is no
// "first migrations" to stop after: goose applies it, and jobsctl finds
// nothing left to do.
func TestGooseThenJobsctlMigrate(t *testing.T) {
	t.Parallel()
	db := databases[0] // PostgreSQL through pgx: jobsctl reaches it by its DSN
	p := db.fresh(t)
	fsys, err := jobs.Migrations(db.dialect)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := goose.NewProvider(db.goose, p.open(t), fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	ctx := context.Background()
	if n := len(versions(t, db.dialect)); n > 1 {
		if _, err := provider.UpTo(ctx, int64(n-1)); err != nil {
			t.Fatalf("goose up-to %d: %v", n-1, err)
		}
		out, code := runJobsctl(t, "--postgres", p.dsn, "migrate")
		if code != 2 || !strings.Contains(out, "goose") || !strings.Contains(out, "goose up") || !strings.Contains(out, "--force") {
			t.Fatalf("jobsctl migrate after goose = exit %d:\n%s\nwant a refusal that says to use goose up", code, out)
		}
		if out, code := runJobsctl(t, "--postgres", p.dsn, "schema"); code != 1 || !strings.Contains(out, "behind") {
			t.Errorf("after the refusal, jobsctl schema = exit %d:\n%s\nwant the schema still behind", code, out)
		}
	}

	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("goose up: %v", err)
	}
	if out, code := runJobsctl(t, "--postgres", p.dsn, "schema"); code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("after goose up, jobsctl schema = exit %d:\n%s", code, out)
	}
	status, err := provider.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range status {
		if st.State != goose.StateApplied {
			t.Errorf("goose lists %s as %s", st.Source.Path, st.State)
		}
	}
	// Up to date: migrate has nothing to do, and says so.
	if out, code := runJobsctl(t, "--postgres", p.dsn, "migrate"); code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("jobsctl migrate when up to date = exit %d:\n%s", code, out)
	}
}

var (
	jobsctlOnce sync.Once
	jobsctlPath string
	jobsctlErr  error
)

// runJobsctl runs jobsctl, built once from this checkout, and returns its
// output (stdout and stderr) and exit status.
func runJobsctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	jobsctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "compat-jobsctl")
		if err != nil {
			jobsctlErr = err
			return
		}
		jobsctlPath = filepath.Join(dir, "jobsctl")
		cmd := exec.Command("go", "build", "-o", jobsctlPath, "github.com/intentjobs/jobs/cmd/jobsctl")
		if out, err := cmd.CombinedOutput(); err != nil {
			jobsctlErr = errors.New(string(out))
		}
	})
	if jobsctlErr != nil {
		t.Fatalf("build jobsctl: %v", jobsctlErr)
	}
	var out bytes.Buffer
	cmd := exec.Command(jobsctlPath, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}
