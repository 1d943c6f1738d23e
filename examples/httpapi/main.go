// Command httpapi serves a page whose button creates a print job through
// the jobshttp handler, and a worker that takes its time over each job.
// Click twice: both clicks end on one job. It mounts the operator's
// console at /console/ and runs a failover.Reconciler, which resolves the
// attempts whose acknowledgement was lost by asking the printers.
//
//	go run ./examples/httpapi                    # embedded SQLite file httpapi.db
//	go run ./examples/httpapi -postgres "$DSN"   # or JOBS_POSTGRES_DSN=… go run ./examples/httpapi
//	go run ./examples/httpapi -lost-acks 0.3     # lose 30% of the printers' acknowledgements
//
// Then open http://localhost:8080, or use curl (see docs/http.md); open
// http://localhost:8080/sign-in?as=operator for the console as an
// operator (any other name reads its own jobs only; see docs/console.md).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/examples/httpapi/app"
	"github.com/intentjobs/jobs/failover"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	sqlite := flag.String("sqlite", "httpapi.db", "SQLite database file (used unless -postgres is given)")
	postgres := flag.String("postgres", os.Getenv("JOBS_POSTGRES_DSN"), "PostgreSQL DSN (default $JOBS_POSTGRES_DSN)")
	delay := flag.Duration("delay", 3*time.Second, "how long the worker takes for a job")
	lostAcks := flag.Float64("lost-acks", 0.2, "share of the printers' acknowledgements lost, leaving attempts in doubt for the reconciler")
	operators := flag.String("operators", "operator", "comma-separated names that run the console as operators")
	flag.Parse()
	if err := run(*addr, *sqlite, *postgres, *delay, *lostAcks, strings.Split(*operators, ",")); err != nil {
		slog.Error("httpapi", "err", err)
		os.Exit(1)
	}
}

func run(addr, sqlitePath, postgresDSN string, delay time.Duration, lostAcks float64, operators []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var store jobs.SQLStore
	var err error
	if postgresDSN != "" {
		store, err = jobs.OpenPostgres(ctx, postgresDSN)
	} else {
		store, err = jobs.OpenSQLite(ctx, sqlitePath)
	}
	if err != nil {
		return err
	}
	defer store.Close()

	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		return err
	}
	// The console and the reconciler need the app's printers, and the app
	// serves the console: the console is built over a reconciler whose
	// providers are filled in once the app exists.
	rec := &failover.Reconciler{Manager: m, StaleAfter: 4 * delay, RecheckAfter: delay}
	con, err := console.New(console.Options{Manager: m, Authorize: app.ConsoleAccess(operators...), Prefix: "/console", Reconciler: rec})
	if err != nil {
		return err
	}
	a := app.New(m, app.Options{WorkDelay: delay, LostAcks: lostAcks, Console: con})
	rec.Providers = a.Providers()
	go rec.Run(ctx, delay)
	srv := &http.Server{
		Addr:              addr,
		Handler:           a.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		// No WriteTimeout: the console's live pages hold their event
		// streams open. Prefer: wait is capped at 30s by the handler.
	}
	workers := make(chan error, 1)
	go func() { workers <- a.Run(ctx) }()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	slog.Info("serving", "url", "http://"+addr, "store", store.Dialect())
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		stop()
		<-workers
		return err
	}
	return <-workers
}
