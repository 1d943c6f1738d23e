package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// malformedIDs are IDs that no job or attempt can have: not valid UTF-8, or
// holding a NUL byte, which PostgreSQL cannot even compare with a stored ID.
var malformedIDs = []string{
	"job_\x00",
	"att_\x00",
	"\x00",
	"job_01JZ\x0000000000000000000000",
	"\xff\xfe",
	"job_\xff",
	"job_01JZ\xc3",                    // a truncated sequence
	"job_\xed\xa0\x80",                // a UTF-16 surrogate encoded as UTF-8
	"job_\xc0\x80",                    // an overlong NUL
	"att_00000000000000000000000\xe2", // the right length, a broken last rune
}

// idVerbs are every Manager method that takes a job or attempt ID.
var idVerbs = []struct {
	name string
	call func(ctx context.Context, m *jobs.Manager, id string) error
}{
	{"Get", func(ctx context.Context, m *jobs.Manager, id string) error { _, err := m.Get(ctx, id); return err }},
	{"Attempts", func(ctx context.Context, m *jobs.Manager, id string) error { _, err := m.Attempts(ctx, id); return err }},
	{"StartAttempt", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.StartAttempt(ctx, id, "")
		return err
	}},
	{"FailJob", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.FailJob(ctx, id, "r")
		return err
	}},
	{"CancelJob", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.CancelJob(ctx, id, "r")
		return err
	}},
	{"Wait", func(ctx context.Context, m *jobs.Manager, id string) error { _, err := m.Wait(ctx, id); return err }},
	{"Attempt", func(ctx context.Context, m *jobs.Manager, id string) error { _, err := m.Attempt(ctx, id); return err }},
	{"MarkRunning", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.MarkRunning(ctx, id, "ref")
		return err
	}},
	{"MarkUnknown", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.MarkUnknown(ctx, id, "r")
		return err
	}},
	{"Fail", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.Fail(ctx, id, "r")
		return err
	}},
	{"Cancel", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.Cancel(ctx, id, "r")
		return err
	}},
	{"Complete", func(ctx context.Context, m *jobs.Manager, id string) error {
		_, err := m.Complete(ctx, id, json.RawMessage(`{"ok":true}`))
		return err
	}},
}

// Every verb answers ErrNotFound for an ID that cannot exist, on both
// stores, and changes nothing; an empty ID stays invalid input, and a
// well-formed unknown ID is not found as before.
func TestMalformedIDsAreNotFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		s, _ := sc.Open(t)
		// A contract makes Complete read the attempt's kind first: one more
		// path an ID travels.
		m, err := jobs.New(s, jobs.Options{Logger: discard, Contracts: map[string]jobs.Contract{"k": summaryContract("v1")}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			id   string
			want error
		}{
			{"", jobs.ErrInvalidInput},
			{"job_00000000000000000000000000", jobs.ErrNotFound},
			{"att_00000000000000000000000000", jobs.ErrNotFound},
		}
		for _, id := range malformedIDs {
			cases = append(cases, struct {
				id   string
				want error
			}{id, jobs.ErrNotFound})
		}
		for _, v := range idVerbs {
			for _, tc := range cases {
				// Wait polls until the job closes: the deadline only bounds
				// a failure, the assertion is on the error.
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := v.call(cctx, m, tc.id)
				cancel()
				if !errors.Is(err, tc.want) || errors.Is(err, jobs.ErrStorage) {
					t.Errorf("%s(%q): %v; want %v", v.name, tc.id, err, tc.want)
				}
			}
		}
		gotJ, errJ := m.Get(ctx, j.ID)
		gotA, errA := m.Attempt(ctx, a.ID)
		if errJ != nil || errA != nil || gotJ.Version != j.Version || gotJ.State != jobs.JobRunning || gotA.State != jobs.AttemptStarting {
			t.Errorf("the job or attempt changed: %s v%d, attempt %s (%v, %v)", gotJ.State, gotJ.Version, gotA.State, errJ, errA)
		}
		if as, err := m.Attempts(ctx, j.ID); err != nil || len(as) != 1 {
			t.Errorf("attempts: %d (%v); want the one", len(as), err)
		}
	})
}
