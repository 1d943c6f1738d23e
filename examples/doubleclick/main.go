// Command doubleclick plays the four moments where a retry or a failover
// usually does damage, and shows what jobs does at each:
//
//  1. a double click: the same request arrives many times at once;
//  2. the same idempotency key with a different payload;
//  3. a timeout: the provider does not answer, and a retry must not start;
//  4. two attempts race and finish in reverse order.
//
// It runs on an embedded SQLite file in a temporary directory:
//
//	go run ./examples/doubleclick
//	go run ./examples/doubleclick -db ./demo.db              # keep the file
//	go run ./examples/doubleclick -postgres "$DSN"          # or use PostgreSQL
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/intentjobs/jobs"
)

func main() {
	dbPath := flag.String("db", "", "SQLite file (default: a new file in a temporary directory)")
	pgDSN := flag.String("postgres", "", "PostgreSQL DSN to use instead of SQLite")
	flag.Parse()
	if err := run(*dbPath, *pgDSN); err != nil {
		fmt.Fprintln(os.Stderr, "doubleclick:", err)
		os.Exit(1)
	}
}

func run(dbPath, pgDSN string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var store jobs.SQLStore
	var err error
	switch {
	case pgDSN != "":
		store, err = jobs.OpenPostgres(ctx, pgDSN)
		fmt.Println("Store: PostgreSQL")
	default:
		if dbPath == "" {
			dir, err := os.MkdirTemp("", "jobs-doubleclick-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			dbPath = filepath.Join(dir, "jobs.db")
		}
		store, err = jobs.OpenSQLite(ctx, dbPath)
		fmt.Println("Store: SQLite file", dbPath)
	}
	if err != nil {
		return err
	}
	defer store.Close()

	// Lost races are logged as warnings; show them in the demo's own words instead.
	quiet := slog.New(slog.DiscardHandler)
	m, err := jobs.New(store, jobs.Options{Logger: quiet})
	if err != nil {
		return err
	}
	user := fmt.Sprintf("user-%d", time.Now().UnixNano()) // a fresh owner per run, so PostgreSQL runs repeat cleanly

	for _, step := range []func(context.Context, *jobs.Manager, string) error{doubleClick, changedPayload, timeout, reverseFinish} {
		if err := step(ctx, m, user); err != nil {
			return err
		}
	}
	fmt.Println("\nDone: one job per intent, one winner per job, nothing charged twice.")
	return nil
}

func charge(user, key string, amount int) jobs.SubmitRequest {
	return jobs.SubmitRequest{
		Owner: user, Key: key, Kind: "charge", Provider: "acme-pay",
		Params: json.RawMessage(fmt.Sprintf(`{"amount": %d, "currency": "eur"}`, amount)),
	}
}

// 1. The button is clicked eight times before the first request returns.
func doubleClick(ctx context.Context, m *jobs.Manager, user string) error {
	fmt.Println("\n1. Double click")
	fmt.Println("   The user clicks \"Pay 12.00 EUR\"; the page stalls; they click seven more times.")
	fmt.Println("   Eight requests with the same Idempotency-Key arrive at the same moment.")
	const clicks = 8
	var wg sync.WaitGroup
	ids := make([]string, clicks)
	created := make([]bool, clicks)
	errs := make([]error, clicks)
	start := make(chan struct{})
	for i := range clicks {
		wg.Go(func() {
			<-start
			var j jobs.Job
			j, created[i], errs[i] = m.Submit(ctx, charge(user, "checkout-1", 1200))
			ids[i] = j.ID
		})
	}
	close(start)
	wg.Wait()
	newJobs := 0
	for i := range clicks {
		if errs[i] != nil {
			return errs[i]
		}
		if ids[i] != ids[0] {
			return fmt.Errorf("click %d got job %s, click 0 got %s", i, ids[i], ids[0])
		}
		if created[i] {
			newJobs++
		}
	}
	fmt.Printf("   All %d requests got job %s; %d of them created it, %d found it.\n", clicks, ids[0], newJobs, clicks-newJobs)
	fmt.Println("   The database's unique (owner, key) constraint decided, not a check in Go.")
	return nil
}

// 2. A client reuses a key for a different amount.
func changedPayload(ctx context.Context, m *jobs.Manager, user string) error {
	fmt.Println("\n2. Same key, different payload")
	fmt.Println("   A buggy client reuses the key \"checkout-1\" for 99.00 EUR instead of 12.00 EUR.")
	_, _, err := m.Submit(ctx, charge(user, "checkout-1", 9900))
	var conflict *jobs.KeyConflictError
	if !errors.As(err, &conflict) {
		return fmt.Errorf("expected a key conflict, got %v", err)
	}
	fmt.Printf("   Refused: the key already belongs to job %s, which asks for something else.\n", conflict.JobID)
	j, err := m.Get(ctx, conflict.JobID)
	if err != nil {
		return err
	}
	fmt.Printf("   Nothing was written; the job still says %s.\n", j.Params)
	fmt.Println("   (Reordering the JSON keys or adding whitespace would have been the same intent.)")
	return nil
}

// 3. The provider does not answer in time.
func timeout(ctx context.Context, m *jobs.Manager, user string) error {
	fmt.Println("\n3. Timeout")
	job, _, err := m.Submit(ctx, charge(user, "checkout-2", 4500))
	if err != nil {
		return err
	}
	a, err := m.StartAttempt(ctx, job.ID, "")
	if err != nil {
		return err
	}
	if _, err := m.MarkRunning(ctx, a.ID, "acme-req-881"); err != nil {
		return err
	}
	fmt.Printf("   Attempt %d sent the charge to acme-pay (their reference: acme-req-881) and waited 30 s: no answer.\n", a.Seq)
	if _, err := m.MarkUnknown(ctx, a.ID, "no answer after 30s"); err != nil {
		return err
	}
	fmt.Println("   The attempt is now \"unknown\", not \"failed\": acme-pay may still be charging the card.")
	_, err = m.StartAttempt(ctx, job.ID, "")
	var inflight *jobs.AttemptInFlightError
	if !errors.As(err, &inflight) {
		return fmt.Errorf("expected the retry to be refused, got %v", err)
	}
	fmt.Printf("   A retry is refused: attempt %s is %s. No second charge can start.\n", inflight.AttemptID, inflight.State)
	fmt.Println("   Later, a reconciler asks acme-pay about acme-req-881: it went through.")
	done, err := m.Complete(ctx, a.ID, json.RawMessage(`{"charge_id": "ch_4500", "status": "paid"}`))
	if err != nil {
		return err
	}
	fmt.Printf("   The unknown attempt is completed with acme-pay's answer; the job is %s: %s.\n", done.State, done.Result)
	_, err = m.StartAttempt(ctx, job.ID, "")
	if !errors.Is(err, jobs.ErrJobClosed) {
		return fmt.Errorf("expected the job to be closed, got %v", err)
	}
	fmt.Println("   Any further retry is refused: the job is closed. The card was charged once.")
	return nil
}

// 4. The primary is slow, a fallback is tried, and they finish in reverse order.
func reverseFinish(ctx context.Context, m *jobs.Manager, user string) error {
	fmt.Println("\n4. Racing attempts finish in reverse order")
	job, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: user, Key: "summary-1", Kind: "summarize", Provider: "model-a",
		Params: json.RawMessage(`{"document": "q3-report.pdf"}`)})
	if err != nil {
		return err
	}
	a, err := m.StartAttempt(ctx, job.ID, "")
	if err != nil {
		return err
	}
	if _, err := m.MarkRunning(ctx, a.ID, "model-a-req-1"); err != nil {
		return err
	}
	fmt.Println("   Attempt A goes to model-a. After 10 s of silence the worker hedges:")
	b, err := m.StartAttempt(ctx, job.ID, "model-b", jobs.Hedge())
	if err != nil {
		return err
	}
	if _, err := m.MarkRunning(ctx, b.ID, "model-b-req-1"); err != nil {
		return err
	}
	fmt.Println("   attempt B goes to model-b. Both started from job version", b.BaseVersion, "and both are running.")
	won, err := m.Complete(ctx, b.ID, json.RawMessage(`{"summary": "Revenue up 12%."}`))
	if err != nil {
		return err
	}
	fmt.Printf("   B answers first (5 s later) and wins the compare-and-swap: job %s, version %d, result %s.\n", won.State, won.Version, won.Result)
	_, err = m.Complete(ctx, a.ID, json.RawMessage(`{"summary": "Revenue rose by twelve percent."}`))
	var lost *jobs.LostRaceError
	if !errors.As(err, &lost) {
		return fmt.Errorf("expected A to lose, got %v", err)
	}
	fmt.Printf("   A answers 30 s after it left: too late. Its result is dropped; the winner was %s.\n", lost.WinnerID)
	atts, err := m.Attempts(ctx, job.ID)
	if err != nil {
		return err
	}
	for _, at := range atts {
		fmt.Printf("   attempt %d on %-8s %s\n", at.Seq, at.Provider, at.State)
	}
	final, err := m.Get(ctx, job.ID)
	if err != nil {
		return err
	}
	fmt.Printf("   The job still holds B's result: %s.\n", final.Result)
	return nil
}
