package jobshttp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/intentjobs/jobs/jobshttp"
)

// A GET of a job ID that no job can have (a NUL byte, bytes that are not
// UTF-8, percent-encoded in the request line) is 404, as for any missing
// job, on both stores: never a 500 from a database that refuses the text.
func TestGetMalformedIDIsNotFound(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, st.open, jobshttp.Options{})
			mux := http.NewServeMux()
			e.h.Register(mux)
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)

			created := serve(e.h, request{})
			if created.Code != http.StatusCreated {
				t.Fatalf("POST: %d %s", created.Code, created.Body)
			}
			get := func(method, path string, headers map[string]string) (int, jobshttp.Problem) {
				t.Helper()
				req, err := http.NewRequest(method, srv.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer alice")
				for k, v := range headers {
					req.Header.Set(k, v)
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				var p jobshttp.Problem
				if method == http.MethodGet && resp.StatusCode != http.StatusOK {
					if err := json.Unmarshal(body, &p); err != nil {
						t.Fatalf("%s %s: %d with body %q: %v", method, path, resp.StatusCode, body, err)
					}
				}
				return resp.StatusCode, p
			}

			if code, _ := get(http.MethodGet, created.Header().Get("Location"), nil); code != http.StatusOK {
				t.Fatalf("GET of the job just created: %d", code)
			}
			for _, path := range []string{
				"/jobs/job_%00",
				"/jobs/%00",
				"/jobs/%FF%FE",
				"/jobs/job_%FF",
				"/jobs/job_01JZ%C3",
				"/jobs/job_%ED%A0%80",
				"/jobs/att_%C0%80",
				"/jobs/job_00000000000000000000000%E2",
			} {
				for _, method := range []string{http.MethodGet, http.MethodHead} {
					code, p := get(method, path, nil)
					if code != http.StatusNotFound {
						t.Errorf("%s %s: %d; want 404", method, path, code)
					}
					if method == http.MethodGet && p.Type != jobshttp.DefaultProblemBase+jobshttp.ProblemNotFound {
						t.Errorf("%s %s: problem %q; want not-found", method, path, p.Type)
					}
				}
				if code, _ := get(http.MethodGet, path, map[string]string{"Prefer": "wait=5"}); code != http.StatusNotFound {
					t.Errorf("GET %s with Prefer: wait: %d; want 404", path, code)
				}
			}
		})
	}
}
