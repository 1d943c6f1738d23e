package console_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/memstore"
)

// Mount the console under /console/ of the application's own mux, with
// the application's authorization.
func Example() {
	m, err := jobs.New(memstore.New(), jobs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	con, err := console.New(console.Options{
		Manager: m,
		Prefix:  "/console",
		Authorize: func(r *http.Request) (console.Principal, error) {
			if r.Header.Get("X-Staff") != "alice" { // the application's own sessions
				return console.Principal{}, console.ErrUnauthenticated
			}
			return console.Principal{Actor: "alice@example.com", Role: console.RoleOperator}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", con)

	for _, staff := range []string{"", "alice"} {
		r := httptest.NewRequest("GET", "/console/in-doubt", nil)
		r.Header.Set("X-Staff", staff)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Content-Type"))
	}
	// Output:
	// 401 text/html; charset=utf-8
	// 200 text/html; charset=utf-8
}
