package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/examples/httpapi/app"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/internal/testdb"
)

// With every acknowledgement lost, each attempt is left in doubt while
// the printer prints on; the Reconciler asks the printer and resolves it
// with the printer's result. The console, mounted at /console/, shows the
// job to an operator and to its owner, and to nobody else.
func TestReconcilerAndConsole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := jobs.New(testdb.NewSQLite(t), jobs.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &failover.Reconciler{Manager: m, RecheckAfter: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}
	con, err := console.New(console.Options{Manager: m, Authorize: app.ConsoleAccess("operator"), Prefix: "/console", Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(m, app.Options{WorkDelay: 10 * time.Millisecond, LostAcks: 1, Console: con, Logger: slog.New(slog.DiscardHandler)})
	rec.Providers = a.Providers()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)

	req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader(`{"kind":"print","provider":"laser","params":{"pages":3}}`))
	req.Header.Set("Authorization", "Bearer carol")
	req.Header.Set("Idempotency-Key", "print-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var j jobs.Job
	json.NewDecoder(resp.Body).Decode(&j)
	resp.Body.Close()
	if j.ID == "" {
		t.Fatalf("POST /jobs = %d", resp.StatusCode)
	}
	// Reconcile until the printer has finished and the attempt is resolved.
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	for {
		rep, err := rec.ReconcileOnce(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Resolved) > 0 {
			break
		}
		if wctx.Err() != nil {
			t.Fatal("the reconciler never resolved the attempt")
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, err := m.Get(ctx, j.ID)
	if err != nil || got.State != jobs.JobSucceeded || !strings.Contains(string(got.Result), `"printed_pages":3`) {
		t.Fatalf("job after the reconciler: %+v, %v", got, err)
	}

	page := func(user, path string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if user != "" {
			req.Header.Set("Authorization", "Bearer "+user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		user string
		code int
		says string
	}{
		{"operator", 200, "operator"},
		{"carol", 200, "viewer"},
		{"dave", 404, ""},
		{"", 401, ""},
	} {
		code, body := page(tc.user, "/console/jobs/"+j.ID)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%q: GET the job's console page = %d", tc.user, code)
		}
		if code == 200 && !strings.Contains(body, "the provider answered: succeeded") {
			t.Errorf("%q: the page does not show the lookup:\n%s", tc.user, body)
		}
	}
}
