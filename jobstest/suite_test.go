package jobstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/memstore"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// coreStore is a memory store seen through the core Store and the one
// capability the suite itself needs, JobLister: every other capability of
// memstore is hidden.
type coreStore struct {
	jobs.Store
	jobs.JobLister
}

func newCoreStore(testing.TB) jobs.Store {
	s := memstore.New()
	return coreStore{s, s}
}

// TestRunOnCoreStore runs the suite on a store that has nothing but the
// core and JobLister: it passes, the cases of the other capabilities
// skipped (TestRunSkipsMissingCapabilities reads which).
func TestRunOnCoreStore(t *testing.T) {
	Run(t, newCoreStore)
}

// TestRunSkipsMissingCapabilities runs TestRunOnCoreStore in a child
// process and reads its verbose output: each case of a capability the
// store lacks is skipped with a message naming that capability, and every
// other case, SubmitTx among them, runs and passes.
func TestRunSkipsMissingCapabilities(t *testing.T) {
	has := Capabilities(newCoreStore(t))
	for name, ok := range has {
		if ok != (name == "JobLister") {
			t.Fatalf("the core store is a jobs.%s: %v; want a JobLister only", name, ok)
		}
	}

	const parent = "TestRunOnCoreStore"
	out, err := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+parent+"$", "-test.v", "-test.count=1").CombinedOutput()
	if err != nil {
		t.Fatalf("the suite on a core store: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	// result returns how the case ended (PASS, SKIP or FAIL) and what it
	// logged before its first subtest or parallel pause.
	result := func(name string) (verdict, logged string) {
		full := parent + "/" + name
		for i, l := range lines {
			if l == "=== RUN   "+full {
				for _, next := range lines[i+1:] {
					if strings.HasPrefix(next, "=== ") || strings.HasPrefix(strings.TrimSpace(next), "--- ") {
						break
					}
					logged += next + "\n"
				}
			}
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "---" && f[2] == full {
				verdict = strings.TrimSuffix(f[1], ":")
			}
		}
		return verdict, logged
	}

	skipped := 0
	for _, c := range cases {
		verdict, logged := result(c.name)
		if c.needs != "" && !has[c.needs] {
			skipped++
			if verdict != "SKIP" || !strings.Contains(logged, "jobs."+c.needs) {
				t.Errorf("case %s, of a %s: %s, logging %q; want it skipped naming jobs.%s", c.name, c.needs, verdict, logged, c.needs)
			}
			continue
		}
		if verdict != "PASS" {
			t.Errorf("case %s: %s, want PASS", c.name, verdict)
		}
	}
	if skipped == 0 {
		t.Errorf("no case was skipped on a store without ClaimStore, VerificationStore or PurgeStore")
	}
}
