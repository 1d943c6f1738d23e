package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/examples/httpapi/app"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
)

// Environment variables read by the browser tests.
const (
	EnvRequireBrowser = "JOBS_TEST_REQUIRE_BROWSER" // 1: a missing browser fails the tests
	EnvChromium       = "JOBS_TEST_CHROMIUM"        // the browser binary; default: chromium on PATH
	EnvScreenshots    = "JOBS_TEST_SCREENSHOTS"     // a directory for screenshots; default: none
)

// chromium returns the browser binary, or skips (fails, when required) the
// test if there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(EnvRequireBrowser) == "1" {
		t.Fatalf("browser required (%s=1) but no chromium on PATH; install it with: apt-get install -y chromium", EnvRequireBrowser)
	}
	t.Skipf("browser tests skipped: no chromium on PATH (apt-get install -y chromium, or set %s)", EnvChromium)
	return ""
}

// browser starts a fresh headless Chromium and returns a tab in it.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(900, 900),
	)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	return tab
}

// startApp starts the example app over a new store, its workers taking
// delay for each job, and a browser tab; all end with the test.
func startApp(t *testing.T, open func(testing.TB) jobs.SQLStore, delay time.Duration) (jobs.SQLStore, *httptest.Server, context.Context) {
	t.Helper()
	chromium(t)
	store := open(t)
	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(m, app.Options{WorkDelay: delay})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	workers := make(chan error, 1)
	go func() { workers <- a.Run(ctx) }()
	t.Cleanup(func() { // before the store closes
		cancel()
		if err := <-workers; err != nil {
			t.Errorf("workers: %v", err)
		}
	})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return store, srv, browser(t, ctx)
}

// readPage reads the page's state, logs the page's log, and saves a
// screenshot under name when JOBS_TEST_SCREENSHOTS is set.
func readPage(t *testing.T, tab context.Context, name string) pageState {
	t.Helper()
	page, err := chromedp.Run(tab, chromedp.Evaluate[pageState](`({
		key: document.getElementById("key-shown").textContent,
		jobID: document.getElementById("job-id").textContent,
		state: document.getElementById("job-state").textContent,
		maxInFlight: document.body.dataset.maxInFlight,
		responses: document.body.dataset.responses,
		log: document.getElementById("log").innerText,
	})`))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	t.Logf("page log:\n%s", page.Log)
	if dir := os.Getenv(EnvScreenshots); dir != "" {
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join(dir, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
		}
		t.Logf("screenshot: %s", path)
	}
	return page
}

var stores = []struct {
	name string
	open func(testing.TB) jobs.SQLStore
}{
	{"SQLite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
	{"Postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
}

// pageState is what the test reads from the page after the clicks.
type pageState struct {
	Key         string `json:"key"`         // the form's idempotency key
	JobID       string `json:"jobID"`       // the job the page shows
	State       string `json:"state"`       // its state
	MaxInFlight string `json:"maxInFlight"` // most POSTs in flight at once
	Responses   string `json:"responses"`   // POST responses received
	Log         string `json:"log"`         // the page's log of clicks
}

// TestDoubleClick clicks the example page's Print button twice while the
// first request is in flight, then checks that the database holds exactly
// one job and that the page shows that job.
func TestDoubleClick(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store, srv, tab := startApp(t, st.open, 2*time.Second)
			err := chromedp.Do(tab,
				chromedp.Navigate(srv.URL),
				chromedp.WaitVisible(chromedp.ID("print")),
				// Two clicks, a few milliseconds apart. The first POST is
				// held by the server (Prefer: wait=1) while the worker takes
				// 2s, so the second lands while the first is in flight.
				chromedp.Click(chromedp.ID("print")),
				chromedp.Click(chromedp.ID("print")),
				chromedp.WaitVisible(chromedp.CSS(`body[data-responses="2"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#job-state.succeeded`)),
			)
			if err != nil {
				t.Fatalf("browser: %v", err)
			}
			page := readPage(t, tab, "doubleclick-"+strings.ToLower(st.name))

			if page.MaxInFlight != "2" {
				t.Errorf("at most %s request(s) were in flight at once; want 2: the second click must land during the first request", page.MaxInFlight)
			}
			if page.Responses != "2" {
				t.Errorf("%s responses reached the page; want 2", page.Responses)
			}
			if !strings.Contains(page.Log, "replayed") || !strings.Contains(page.Log, "created job") {
				t.Errorf("the page log does not show one creation and one replay:\n%s", page.Log)
			}

			snap, err := invariant.TakeSnapshot(context.Background(), store)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Jobs) != 1 {
				t.Fatalf("%d jobs in the database after a double click; want exactly 1: %+v", len(snap.Jobs), snap.Jobs)
			}
			j := snap.Jobs[0]
			if page.JobID != j.ID {
				t.Errorf("the page shows job %q; the database holds %q", page.JobID, j.ID)
			}
			if j.Key != page.Key || j.State != jobs.JobSucceeded || j.Attempts != 1 || page.State != "succeeded" {
				t.Errorf("job %+v (page state %q); want key %q, succeeded after 1 attempt", j, page.State, page.Key)
			}
			if v := snap.Check(); len(v) != 0 {
				t.Errorf("invariants violated: %v", v)
			}
		})
	}
}
