package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs/memstore"
)

var sigAttr = regexp.MustCompile(`data-live="([^"]*)" data-sig="([^"]*)"`)

// A live page's feed stays quiet while nothing changes (a keep-alive
// comment at each look), and says "change" once the page's data changed:
// a job's page when its attempt moves, the queue when an attempt enters
// it, a list when a job is added.
func TestLiveFeeds(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		srv := httptest.NewServer(e.h)
		defer srv.Close()
		j, a := e.unknownAttempt(t, "alice", "k1")
		for _, tc := range []struct {
			page   string
			change func()
		}{
			{"/console/jobs/" + j.ID, func() {
				if _, err := e.m.Cancel(e.ctx, a.ID, "never arrived"); err != nil {
					t.Fatal(err)
				}
			}},
			{"/console/in-doubt", func() { e.unknownAttempt(t, "alice", "k2") }},
			{"/console/?owner=alice", func() { e.submit(t, "alice", "k3") }},
		} {
			t.Run(tc.page, func(t *testing.T) {
				r := e.get(t, "val:viewer", tc.page)
				m := sigAttr.FindStringSubmatch(r.body)
				if m == nil {
					t.Fatalf("%s is not live:\n%s", tc.page, r.body)
				}
				feed := strings.ReplaceAll(m[1], "&amp;", "&") + "&sig=" + m[2]
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+feed, nil)
				req.Header.Set("X-User", "val:viewer")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Fatalf("Content-Type %q", ct)
				}
				lines := bufio.NewScanner(resp.Body)
				next := func() string {
					for lines.Scan() {
						if l := lines.Text(); l != "" && !strings.HasPrefix(l, "retry:") {
							return l
						}
					}
					t.Fatalf("the feed ended: %v", lines.Err())
					return ""
				}
				if l := next(); l != ": ." {
					t.Fatalf("before any change the feed says %q, want a keep-alive", l)
				}
				tc.change()
				for {
					l := next()
					if l == ": ." {
						continue
					}
					if l != "event: change" {
						t.Fatalf("the feed says %q, want a change", l)
					}
					break
				}
			})
		}
	})
}

// A feed answers as its page would for what the actor may not see, or
// what does not exist.
func TestLiveFeedRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memstore.New())
	j, _ := e.unknownAttempt(t, "alice", "k1")
	e.get(t, "bob:viewer:bob", "/console/live?page=job&id="+j.ID).want(t, 404)
	e.get(t, "val:viewer", "/console/live?page=job&id=job_00000000000000000000000000").want(t, 404)
	e.get(t, "val:viewer", "/console/live?page=elsewhere").want(t, 400)
	e.get(t, "", "/console/live?page=in-doubt").want(t, 401)
}
