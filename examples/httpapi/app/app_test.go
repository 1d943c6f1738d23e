package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/examples/httpapi/app"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var keyInPage = regexp.MustCompile(`id="key" name="key" value="([^"]+)"`)

func TestApp(t *testing.T) {
	t.Parallel()
	store := testdb.NewSQLite(t)
	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A job left pending by a previous run: Run picks it up.
	left, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "carol", Key: "left", Kind: "print", Provider: "inkjet", Params: json.RawMessage(`{"pages":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(m, app.Options{WorkDelay: 20 * time.Millisecond})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)

	// Every rendering of the page is a new form with a new key, and a
	// browser without an owner cookie gets one.
	var keys []string
	var cookie *http.Cookie
	for range 2 {
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		match := keyInPage.FindStringSubmatch(string(body))
		if resp.StatusCode != 200 || match == nil {
			t.Fatalf("page: %d, key found: %v", resp.StatusCode, match != nil)
		}
		keys = append(keys, match[1])
		for _, c := range resp.Cookies() {
			if c.Name == app.OwnerCookie {
				cookie = c
			}
		}
	}
	if keys[0] == keys[1] {
		t.Errorf("two renderings share the key %s", keys[0])
	}
	if cookie == nil || cookie.Value == "" {
		t.Fatal("no owner cookie")
	}

	// The page's request, with the cookie: a job that the worker completes.
	req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader(`{"kind":"print","provider":"laser","params":{"document":"a.pdf","pages":3}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+keys[0]+`"`)
	req.Header.Set("Prefer", "wait=10")
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var view struct {
		ID     string          `json:"id"`
		State  string          `json:"state"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST: %d %v", resp.StatusCode, err)
	}
	if view.State != "succeeded" || !strings.HasPrefix(string(view.Result), `{"attempt":1,"printed_pages":3,"printer":"laser","spool":"spool-`) {
		t.Errorf("job %+v; want succeeded with the printed pages", view)
	}
	job, err := m.Get(ctx, view.ID)
	if err != nil || job.Owner != cookie.Value || job.Key != keys[0] {
		t.Errorf("stored job %+v, %v; want owner %s and key %s", job, err, cookie.Value, keys[0])
	}

	// The check refuses what the shop does not offer.
	req, _ = http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader(`{"kind":"fax","provider":"laser"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "fax-1")
	req.Header.Set("Authorization", "Bearer dave")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 422 {
		t.Errorf("fax: %d; want 422", resp2.StatusCode)
	}

	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if got, err := m.Wait(wctx, left.ID); err != nil || got.State != jobs.JobSucceeded {
		t.Errorf("the job left pending: %+v, %v; want it completed after Run started", got, err)
	}
}

// TestOverlongTokenIs401: the demo takes the bearer token as the owner, so
// a token the jobs package cannot store as an owner (300 bytes) is the
// client's bad credentials: 401, on the page's API as on curl's, and no job.
func TestOverlongTokenIs401(t *testing.T) {
	t.Parallel()
	store := testdb.NewSQLite(t)
	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(m, app.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)

	token := strings.Repeat("t", 300)
	for _, method := range []string{"POST", "GET"} {
		path := "/jobs"
		if method == "GET" {
			path = "/jobs/job_00000000000000000000000000"
		}
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"kind":"print","provider":"laser","params":{"pages":1}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "long-token")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Code string `json:"code"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || err != nil || p.Code != "owner-invalid" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s with a 300-byte token: %d, code %q (%v), WWW-Authenticate %q; want 401 owner-invalid with a challenge",
				method, resp.StatusCode, p.Code, err, resp.Header.Get("WWW-Authenticate"))
		}
	}
	snap, err := invariant.TakeSnapshot(context.Background(), store)
	if err != nil || len(snap.Jobs) != 0 {
		t.Errorf("%d jobs written for refused credentials (%v); want none", len(snap.Jobs), err)
	}
}

// TestBurstBeyondTheQueueAllSucceed submits 2,000 jobs at once, more than
// the workers' queue holds, while the workers have not started: every one
// of them must still reach succeeded, none left pending in the store.
func TestBurstBeyondTheQueueAllSucceed(t *testing.T) {
	t.Parallel()
	// Beyond the queue, whatever its size: QueueSize jobs wait in memory,
	// the rest in the store until the sweep hands them over.
	n, queue := testdb.Size(2000, 300), testdb.Size(1024, 64)
	for _, st := range []struct {
		name string
		open func(testing.TB) jobs.SQLStore
	}{
		{"SQLite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
		{"Postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			store := st.open(t)
			m, err := jobs.New(store, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			a := app.New(m, app.Options{WorkDelay: time.Millisecond, Workers: 8, QueueSize: queue, Logger: slog.New(slog.DiscardHandler)})
			srv := httptest.NewServer(a.Handler())
			t.Cleanup(srv.Close)
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			t.Cleanup(client.CloseIdleConnections)

			// 64 senders released together, n requests between them.
			keys := make(chan int, n)
			for i := range n {
				keys <- i
			}
			close(keys)
			ids := make([]string, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					<-start
					for i := range keys {
						req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader(`{"kind":"print","provider":"laser","params":{"pages":1}}`))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Idempotency-Key", fmt.Sprintf("burst-%d", i))
						req.Header.Set("Authorization", "Bearer erin")
						resp, err := client.Do(req)
						if err != nil {
							t.Errorf("POST %d: %v", i, err)
							continue
						}
						var r struct {
							ID string `json:"id"`
						}
						err = json.NewDecoder(resp.Body).Decode(&r)
						resp.Body.Close()
						if resp.StatusCode != 201 || err != nil {
							t.Errorf("POST %d: %d %v", i, resp.StatusCode, err)
						}
						ids[i] = r.ID
					}
				})
			}
			close(start)
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
			// A generous bound, only so that a lost job fails the test
			// instead of hanging it.
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
			defer wcancel()
			open := 0
			for _, id := range ids {
				if j, err := m.Wait(wctx, id); err != nil || j.State != jobs.JobSucceeded {
					open++
				}
			}
			if open > 0 {
				snap, _ := invariant.TakeSnapshot(context.Background(), store)
				states := map[jobs.JobState]int{}
				for _, j := range snap.Jobs {
					states[j.State]++
				}
				t.Fatalf("%d of %d jobs did not succeed; the store holds %v", open, n, states)
			}
		})
	}
}
