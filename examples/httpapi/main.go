// Command httpapi serves a page whose button creates a print job through
// the jobshttp handler, and a worker that takes its time over each job.
// Click twice: both clicks end on one job.
//
//	go run ./examples/httpapi                    # embedded SQLite file httpapi.db
//	go run ./examples/httpapi -postgres "$DSN"   # or JOBS_POSTGRES_DSN=… go run ./examples/httpapi
//
// Then open http://localhost:8080, or use curl (see docs/http.md).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/examples/httpapi/app"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	sqlite := flag.String("sqlite", "httpapi.db", "SQLite database file (used unless -postgres is given)")
	postgres := flag.String("postgres", os.Getenv("JOBS_POSTGRES_DSN"), "PostgreSQL DSN (default $JOBS_POSTGRES_DSN)")
	delay := flag.Duration("delay", 3*time.Second, "how long the worker takes for a job")
	flag.Parse()
	if err := run(*addr, *sqlite, *postgres, *delay); err != nil {
		slog.Error("httpapi", "err", err)
		os.Exit(1)
	}
}

func run(addr, sqlitePath, postgresDSN string, delay time.Duration) error {
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
	a := app.New(m, app.Options{WorkDelay: delay})
	srv := &http.Server{
		Addr:              addr,
		Handler:           a.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      40 * time.Second, // above the handler's 30s cap on Prefer: wait
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
