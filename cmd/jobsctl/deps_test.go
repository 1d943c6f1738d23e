package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestJobsctlLinksNoTestCode keeps test code out of the operators' binary:
// jobsctl checks invariants with package invariant, which must not bring
// in package testing, goleak, go-cmp or this repository's test packages.
func TestJobsctlLinksNoTestCode(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go tool is not on PATH, so jobsctl's dependencies cannot be listed: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-deps", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/intentjobs/jobs/invariant") {
		t.Fatalf("go list -deps does not list package invariant, which jobsctl check uses; got:\n%s", out)
	}
	forbidden := []struct {
		path   string
		prefix bool
	}{
		{"testing", false},
		{"go.uber.org/goleak", true},
		{"github.com/google/go-cmp", true},
		{"github.com/intentjobs/jobs/jobstest", true},
		{"github.com/intentjobs/jobs/internal/testdb", true},
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f.path || f.prefix && strings.HasPrefix(dep, f.path+"/") {
				t.Errorf("jobsctl links %s", dep)
			}
		}
	}
}
