package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
)

// RetiredKey and ParseRetiredKey round-trip any key and job ID, and a
// retired key is longer than any key Submit accepts, so that no client's
// key can equal it. Strings that are not retired keys parse as such.
func TestRetiredKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, by string }{
		{"k", "job_01KE4Z2M3D5G7H8J9K0MNPQRST"},
		{"...leading dots", "job_1"},
		{"12:job_x:trailing", "job_2"},
		{strings.Repeat("é", 127), "job_3"},                  // 254 bytes
		{strings.Repeat("k", 255), strings.Repeat("j", 255)}, // both at the limit
		{"jobs:retired-key;replaced-by=5:job_4", "job_5"},    // a key that looks like a header
	} {
		stored := jobs.RetiredKey(tc.key, tc.by)
		if len(stored) <= 255 {
			t.Errorf("RetiredKey(%q, %q) is %d bytes; want more than any client key", tc.key, tc.by, len(stored))
		}
		key, by, ok := jobs.ParseRetiredKey(stored)
		if !ok || key != tc.key || by != tc.by {
			t.Errorf("ParseRetiredKey(RetiredKey(%q, %q)) = %q, %q, %v", tc.key, tc.by, key, by, ok)
		}
		if other := jobs.RetiredKey(tc.key, tc.by+"x"); other == stored {
			t.Errorf("two replacements of %q share a retired key", tc.key)
		}
	}
	header := "jobs:retired-key;replaced-by="
	dots := strings.Repeat(".", 320)
	for _, s := range []string{
		"",
		"k",
		strings.Repeat("k", 255),
		header + "5:job_1",                  // no more than a client key could be
		header + "x:job_1" + dots + "k",     // no length
		header + ":job_1" + dots + "k",      // an empty length
		header + "99999:job_1" + dots + "k", // a length past the end
		header + "5:job_1" + strings.Repeat("-", 320) + "k", // padding that is not dots
		dots + header + "5:job_1k",                          // the header not at the start
		"jobs:retired-key;replaced=5:job_1" + dots,          // another header
	} {
		if key, by, ok := jobs.ParseRetiredKey(s); ok {
			t.Errorf("ParseRetiredKey(%.60q…) = %q, %q, true; want not a retired key", s, key, by)
		}
	}
}

// Frees is the policy table of docs/guide.md.
func TestKeyReuseFrees(t *testing.T) {
	t.Parallel()
	states := []jobs.JobState{jobs.JobPending, jobs.JobRunning, jobs.JobSucceeded, jobs.JobFailed, jobs.JobCancelled}
	for _, tc := range []struct {
		reuse jobs.KeyReuse
		frees []jobs.JobState
	}{
		{jobs.KeyReuseNever, nil},
		{jobs.KeyReuseAfterFailure, []jobs.JobState{jobs.JobFailed}},
		{jobs.KeyReuseAfterFailureOrCancel, []jobs.JobState{jobs.JobFailed, jobs.JobCancelled}},
		{jobs.KeyReuse(7), nil},
	} {
		for _, s := range states {
			want := false
			for _, f := range tc.frees {
				want = want || f == s
			}
			if got := tc.reuse.Frees(s); got != want {
				t.Errorf("%v.Frees(%s) = %v, want %v", tc.reuse, s, got, want)
			}
		}
	}
	if jobs.KeyReuse(7).Valid() || !jobs.KeyReuseAfterFailureOrCancel.Valid() {
		t.Error("Valid does not tell the policies from other values")
	}
}

// SubmitPgxTx, like SubmitTx, refuses a key reuse policy before it writes.
func TestSubmitPgxTxRefusesKeyReuse(t *testing.T) {
	t.Parallel()
	p := newPgxSetup(t)
	ctx := context.Background()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	r := chargeReq("u", "reuse-in-tx")
	r.Reuse = jobs.KeyReuseAfterFailure
	var ie *jobs.InputError
	if _, _, err := p.m.SubmitPgxTx(ctx, tx, r); !errors.Is(err, jobs.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "Reuse" {
		t.Fatalf("SubmitPgxTx with Reuse = %v; want an *InputError for Reuse", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.m.GetByKey(ctx, "u", "reuse-in-tx"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("GetByKey after the refusal = %v; want ErrNotFound", err)
	}
}
