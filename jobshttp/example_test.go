package jobshttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobshttp"
)

// A client sends its request twice with one Idempotency-Key, as a double
// click or a retry does: one job, and the second answer is a replay of the
// first. The same key with another request is refused.
func ExampleHandler() {
	ctx := context.Background()
	store, err := jobs.OpenSQLite(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	h := jobshttp.New(m, jobshttp.Options{
		Owner: func(r *http.Request) (string, bool) { // the host's authentication
			return strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		},
	})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	type answer struct {
		status, replayed string
		ID, Code         string // from the body: the receipt's id, or the problem's code
	}
	post := func(body string) answer {
		req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"order-42"`)
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		a := answer{status: resp.Status, replayed: resp.Header.Get(jobshttp.HeaderReplayed)}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			log.Fatal(err)
		}
		return a
	}

	const order = `{"kind":"print","provider":"laser","params":{"document":"a.pdf","pages":3}}`
	first, second := post(order), post(order)
	fmt.Println("first: ", first.status)
	fmt.Println("second:", second.status, "replayed:", second.replayed)
	fmt.Println("same job:", first.ID == second.ID)

	other := post(`{"kind":"print","provider":"laser","params":{"document":"a.pdf","pages":30}}`)
	fmt.Println("other request, same key:", other.status, other.Code)
	// Output:
	// first:  201 Created
	// second: 201 Created replayed: true
	// same job: true
	// other request, same key: 422 Unprocessable Entity idempotency-key-conflict
}
