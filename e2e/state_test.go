package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/invariant"
)

// TestLateSecondClickEndsOnSucceeded clicks Print a second time 2.3s into a
// 3s print: the second POST is held (Prefer: wait=1) across the moment the
// job succeeds, while the page's watch already shows it. Whatever order the
// answers come in, the page must end on "succeeded", never on an older
// state.
func TestLateSecondClickEndsOnSucceeded(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store, srv, tab := startApp(t, st.open, 3*time.Second)
			err := chromedp.Do(tab,
				chromedp.Navigate(srv.URL),
				chromedp.WaitVisible(chromedp.ID("print")),
				chromedp.Click(chromedp.ID("print")),
				chromedp.Sleep(2300*time.Millisecond),
				chromedp.Click(chromedp.ID("print")),
				chromedp.WaitVisible(chromedp.CSS(`body[data-responses="2"]`)),
			)
			if err != nil {
				t.Fatalf("browser: %v", err)
			}
			// Both answers are in; the page must reach succeeded and stay.
			settle, cancel := context.WithTimeout(tab, 15*time.Second)
			err = chromedp.Do(settle, chromedp.WaitVisible(chromedp.CSS(`#job-state.succeeded`)))
			cancel()
			page := readPage(t, tab, "late-second-click-"+strings.ToLower(st.name))
			if err != nil || page.State != "succeeded" {
				t.Fatalf("the page ends on %q (%v); want succeeded", page.State, err)
			}
			snap, err := invariant.TakeSnapshot(context.Background(), store)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Jobs) != 1 || snap.Jobs[0].ID != page.JobID || snap.Jobs[0].State != jobs.JobSucceeded {
				t.Errorf("the database holds %+v; want the page's job %s, succeeded", snap.Jobs, page.JobID)
			}
		})
	}
}

// TestPageShowsOnlyNewerViews feeds the page's show() views of one job in
// the orders responses can arrive in, and checks what the page ends on: a
// terminal state is final, and an open one gives way only to a higher
// version or more attempts.
func TestPageShowsOnlyNewerViews(t *testing.T) {
	_, srv, tab := startApp(t, stores[0].open, time.Second)
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.ID("print"))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	const (
		pending   = `{"id":"j","state":"pending","version":1,"attempts":0}`
		running1  = `{"id":"j","state":"running","version":1,"attempts":1}`
		running2  = `{"id":"j","state":"running","version":1,"attempts":2}`
		succeeded = `{"id":"j","state":"succeeded","version":2,"attempts":1,"result":{"ok":true}}`
		cancelled = `{"id":"j","state":"cancelled","version":2,"attempts":1,"reason":"x"}`
		receipt   = `{"id":"j","href":"/jobs/j"}`
	)
	for _, tc := range []struct {
		name  string
		views []string
		want  string // state shown at the end, and its attempts
	}{
		{"in order", []string{pending, running1, succeeded}, "succeeded (1 attempt)"},
		{"running after succeeded", []string{running1, succeeded, running1}, "succeeded (1 attempt)"},
		{"pending after succeeded", []string{succeeded, pending}, "succeeded (1 attempt)"},
		{"another terminal state after succeeded", []string{succeeded, cancelled}, "succeeded (1 attempt)"},
		{"fewer attempts after more", []string{running2, running1}, "running (2 attempts)"},
		{"pending after running", []string{running1, pending}, "running (1 attempt)"},
		{"a receipt after running", []string{running1, receipt}, "running (1 attempt)"},
		{"succeeded after the second attempt", []string{running2, succeeded}, "succeeded (1 attempt)"},
	} {
		script := `shown = null; [` + strings.Join(tc.views, ",") + `].forEach(show);
			document.getElementById("job-state").textContent + " " + document.getElementById("job-attempts").textContent`
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](script))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: the page shows %q; want %q", tc.name, got, tc.want)
		}
	}
}
