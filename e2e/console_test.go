package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/examples/httpapi/app"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/jobstest"
)

var update = flag.Bool("update", false, "rewrite the console's screenshots in docs/console/")

// consoleEnv is the example app with the console mounted, over a store,
// and a browser tab signed in as an operator.
type consoleEnv struct {
	store jobs.SQLStore
	m     *jobs.Manager
	srv   *httptest.Server
	tab   context.Context
}

func startConsole(t *testing.T, open func(testing.TB) jobs.SQLStore, clock ...jobs.Clock) *consoleEnv {
	t.Helper()
	chromium(t)
	store := open(t)
	var clk jobs.Clock
	if len(clock) > 0 {
		clk = clock[0]
	}
	m, err := jobs.New(store, jobs.Options{Logger: slog.New(slog.DiscardHandler), Clock: clk,
		Contracts: map[string]jobs.Contract{"charge": {Version: "v2", Validate: func(r json.RawMessage) error {
			var v struct{ ID string }
			if json.Unmarshal(r, &v) != nil || v.ID == "" {
				return fmt.Errorf(`no "id" in the result`)
			}
			return nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &failover.Reconciler{Manager: m, Logger: slog.New(slog.DiscardHandler)}
	con, err := console.New(console.Options{Manager: m, Authorize: app.ConsoleAccess("operator"), Prefix: "/console",
		Reconciler: rec, LiveEvery: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(m, app.Options{WorkDelay: time.Second, Console: con, Logger: slog.New(slog.DiscardHandler)})
	rec.Providers = a.Providers()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	workers := make(chan error, 1)
	go func() { workers <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-workers; err != nil {
			t.Errorf("workers: %v", err)
		}
	})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	tab := browser(t, ctx)
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/sign-in?as=operator"), chromedp.WaitVisible(chromedp.CSS(`span.who`))); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	return &consoleEnv{store: store, m: m, srv: srv, tab: tab}
}

// inDoubt submits a charge whose attempt was acknowledged with ref and
// then timed out: in doubt, for an operator.
func (e *consoleEnv) inDoubt(t *testing.T, owner, key, ref string) (jobs.Job, jobs.Attempt) {
	t.Helper()
	ctx := context.Background()
	j, _, err := e.m.Submit(ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "stripe",
		Params: json.RawMessage(`{"amount":1200,"currency":"EUR"}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if ref != "" {
		if _, err := e.m.MarkRunning(ctx, a.ID, ref); err != nil {
			t.Fatal(err)
		}
	}
	if a, err = e.m.MarkUnknown(ctx, a.ID, "no answer within 30s"); err != nil {
		t.Fatal(err)
	}
	return j, a
}

func (e *consoleEnv) run(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		body, _ := chromedp.Run(e.tab, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage:\n%s", what, err, body)
	}
}

// eval evaluates expr in the tab.
func eval[T any](t *testing.T, e *consoleEnv, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func text(t *testing.T, e *consoleEnv, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// An operator finds a job by its provider's reference from the search box
// and reads its story on the timeline.
func TestConsoleSearchAndTimeline(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			e := startConsole(t, st.open)
			j, a := e.inDoubt(t, "alice", "order-1", "ch_3Nx8")
			e.run(t, "search",
				chromedp.Navigate(e.srv.URL+"/console/"),
				chromedp.SendKeys(chromedp.CSS(`form.quick input[name=q]`), "ch_3Nx8"),
				chromedp.Submit(chromedp.CSS(`form.quick`)),
				chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)),
			)
			if h1 := text(t, e, "h1"); !strings.Contains(h1, j.ID) {
				t.Errorf("the search for the reference shows %q, want job %s", h1, j.ID)
			}
			tl := text(t, e, "ol.timeline")
			for _, want := range []string{"job submitted", "attempt 1 started", "attempt 1 acknowledged", "provider reference ch_3Nx8",
				"attempt 1 timed out: in doubt", "no answer within 30s"} {
				if !strings.Contains(tl, want) {
					t.Errorf("the timeline lacks %q:\n%s", want, tl)
				}
			}
			if row := text(t, e, "tr#"+a.ID); !strings.Contains(row, "unknown") {
				t.Errorf("the attempt's row: %q", row)
			}
		})
	}
}

// An operator resolves an attempt in doubt with the provider's result; the
// confirmation is double-clicked and, at the same moment, sent twice more
// from the page: the attempt is resolved once.
func TestConsoleResolveOnce(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			e := startConsole(t, st.open)
			j, a := e.inDoubt(t, "alice", "order-2", "")
			e.run(t, "open the confirmation",
				chromedp.Navigate(e.srv.URL+"/console/jobs/"+j.ID),
				chromedp.Click(chromedp.CSS(`tr#`+a.ID+` a[href*="outcome=succeeded"]`)),
				chromedp.WaitVisible(chromedp.CSS(`form.confirm`)),
				chromedp.SendKeys(chromedp.CSS(`textarea[name=result]`), `{"id":"ch_9","amount":1200}`),
				chromedp.SendKeys(chromedp.CSS(`textarea[name=reason]`), "the provider's dashboard shows ch_9 captured"),
			)
			// Two more sends of the same form, as a retrying client would,
			// at the moment of the double click.
			eval[string](t, e, `(() => {
				const f = document.querySelector("form.confirm");
				const send = () => fetch(f.action, {method: "POST", body: new URLSearchParams(new FormData(f)), redirect: "manual"});
				send(); send();
				return "sent";
			})()`)
			e.run(t, "confirm twice",
				chromedp.DoubleClick(chromedp.CSS(`form.confirm button[type=submit]`)),
				chromedp.WaitVisible(chromedp.CSS(`p.flash`)),
			)
			if flash := text(t, e, "p.flash"); !strings.Contains(flash, "Done.") || !strings.Contains(flash, "attempt 1 succeeded") {
				t.Errorf("the page after the resolution says %q", flash)
			}
			ctx := context.Background()
			got, err := e.m.Get(ctx, j.ID)
			if err != nil || got.State != jobs.JobSucceeded || got.CompletedBy != a.ID {
				t.Fatalf("job %+v, %v; want succeeded by %s", got, err, a.ID)
			}
			recs, err := e.store.(jobs.JobLister).ListJobs(ctx, jobs.JobQuery{Owner: "console/" + j.ID})
			if err != nil || len(recs) != 1 || recs[0].State != jobs.JobSucceeded || recs[0].Attempts != 1 {
				t.Errorf("action records %+v, %v; want one, carried out once", recs, err)
			}
			if acts := text(t, e, "table.actions"); !strings.Contains(acts, "operator") || !strings.Contains(acts, "dashboard shows ch_9") {
				t.Errorf("the actions table: %q", acts)
			}
		})
	}
}

// An action that the state no longer allows is refused with a message,
// and changes nothing.
func TestConsoleRefusedAction(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			e := startConsole(t, st.open)
			j, a := e.inDoubt(t, "alice", "order-3", "ch_77")
			e.run(t, "open the confirmation",
				chromedp.Navigate(e.srv.URL+"/console/jobs/"+j.ID),
				chromedp.Click(chromedp.CSS(`tr#`+a.ID+` a[href*="outcome=failed"]`)),
				chromedp.WaitVisible(chromedp.CSS(`form.confirm`)),
				chromedp.SendKeys(chromedp.CSS(`textarea[name=reason]`), "the provider says declined"),
			)
			// Meanwhile the provider's result arrives.
			if _, err := e.m.Complete(context.Background(), a.ID, json.RawMessage(`{"id":"ch_77"}`)); err != nil {
				t.Fatal(err)
			}
			e.run(t, "confirm", chromedp.Click(chromedp.CSS(`form.confirm button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
			flash := text(t, e, "p.flash")
			if !strings.Contains(flash, "Not done.") || !strings.Contains(flash, "already succeeded") || !strings.Contains(flash, "nothing was changed") {
				t.Errorf("the refusal says %q", flash)
			}
			if got, _ := e.m.Attempt(context.Background(), a.ID); got.State != jobs.AttemptSucceeded {
				t.Errorf("attempt %s after a refused action, want succeeded", got.State)
			}
		})
	}
}

// A job's page follows the job: when its attempt in doubt is resolved
// elsewhere, the page shows it without being reloaded.
func TestConsoleLiveUpdate(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			e := startConsole(t, st.open)
			j, a := e.inDoubt(t, "alice", "order-4", "ch_5")
			e.run(t, "open the job",
				chromedp.Navigate(e.srv.URL+"/console/jobs/"+j.ID),
				chromedp.WaitVisible(chromedp.CSS(`main[data-live-open="1"]`)),
			)
			eval[bool](t, e, `window.notReloaded = true`)
			if _, err := e.m.Complete(context.Background(), a.ID, json.RawMessage(`{"id":"ch_5"}`)); err != nil {
				t.Fatal(err)
			}
			e.run(t, "wait for the update", chromedp.WaitVisible(chromedp.CSS(`h1 .state.s-succeeded`)))
			if !eval[bool](t, e, `window.notReloaded === true`) {
				t.Errorf("the page was reloaded rather than updated in place")
			}
			if tl := text(t, e, "ol.timeline"); !strings.Contains(tl, "attempt 1 won") {
				t.Errorf("the updated timeline lacks the win:\n%s", tl)
			}
		})
	}
}

// TestConsoleScreenshots renders the console's main pages over a small
// shop's data; with -update it rewrites docs/console/*.png:
//
//	cd e2e && go test -run ConsoleScreenshots -update
func TestConsoleScreenshots(t *testing.T) {
	// A day of a shop, on a clock that the test moves: charges that
	// succeeded after a while, some declined, some left in doubt.
	clock := jobstest.NewClock(time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second))
	e := startConsole(t, stores[0].open, clock)
	ctx := context.Background()
	m := e.m
	for i := range 60 {
		clock.Advance(23 * time.Minute)
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: fmt.Sprintf("customer-%d", i%7), Key: fmt.Sprintf("order-%d", 100+i),
			Kind: "charge", Provider: []string{"stripe", "adyen", "stripe"}[i%3], Params: json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, 500+i*125))})
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Duration(300+(i*137)%900) * time.Millisecond)
		m.MarkRunning(ctx, a.ID, fmt.Sprintf("ch_%04d", 7000+i))
		clock.Advance(time.Duration(200+(i*71)%1200) * time.Millisecond)
		switch {
		case i%9 == 4:
			m.Fail(ctx, a.ID, "card declined")
		case i%17 == 8:
			m.MarkUnknown(ctx, a.ID, "no answer within 30s")
		default:
			m.Complete(ctx, a.ID, json.RawMessage(fmt.Sprintf(`{"id":"ch_%04d"}`, 7000+i)))
		}
	}
	clock.Advance(time.Minute)
	j, a := e.inDoubt(t, "customer-9", "order-200", "")
	// A reconciler asks the providers about the attempts in doubt: stripe
	// cannot look requests up without a reference, adyen says pending.
	rec := &failover.Reconciler{Manager: m, Logger: slog.New(slog.DiscardHandler), Providers: map[string]failover.Provider{
		"stripe": lookupOnly{failover.Outcome{}, failover.ErrLookupUnsupported},
		"adyen":  lookupOnly{failover.Outcome{State: failover.OutcomePending}, nil},
	}}
	clock.Advance(2 * time.Minute)
	doubts, err := e.store.(jobs.AttemptLister).ListAttempts(ctx, jobs.AttemptQuery{States: []jobs.AttemptState{jobs.AttemptUnknown}})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range doubts {
		if i%2 == 0 || d.ID == a.ID {
			if _, err := rec.ReconcileAttempt(ctx, d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(time.Minute)
	if _, err := m.VerifyProvider(ctx, "adyen", "charge", func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"id":"verify-1"}`), nil
	}, jobs.ValidFor(7*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	shots := []struct {
		name, path, wait string
	}{
		{"jobs", "/console/", "table.jobs"},
		{"job", "/console/jobs/" + j.ID, "ol.timeline"},
		{"in-doubt", "/console/in-doubt", "table.doubts"},
		{"confirm", "/console/confirm?action=resolve&outcome=succeeded&job=" + j.ID + "&attempt=" + a.ID, "form.confirm"},
		{"providers", "/console/providers", "svg.chart"},
	}
	dir := filepath.Join("..", "docs", "console")
	for _, s := range shots {
		e.run(t, s.name,
			chromedp.EmulateViewport(1280, 860),
			chromedp.Navigate(e.srv.URL+s.path),
			chromedp.WaitVisible(chromedp.CSS(s.wait)),
		)
		ctx, cancel := context.WithTimeout(e.tab, 30*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Fatalf("%s: screenshot: %v", s.name, err)
		}
		if len(png) == 0 {
			t.Errorf("%s: empty screenshot", s.name)
		}
		if *update {
			if err := os.WriteFile(filepath.Join(dir, s.name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// lookupOnly is a provider that only answers lookups, always alike.
type lookupOnly struct {
	out failover.Outcome
	err error
}

func (p lookupOnly) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, failover.Definitive(fmt.Errorf("not called"))
}

func (p lookupOnly) Lookup(context.Context, jobs.Attempt) (failover.Outcome, error) {
	return p.out, p.err
}
