// Command submitcost runs Submits of new keys, one after another, on one
// contender in a SQLite file of its own, so that a profiler that counts
// instructions (valgrind's callgrind) or a CPU profile can price each part
// of a Submit, free of the noise of a shared machine. Only the function
// measured runs the timed Submits: give it to callgrind's --toggle-collect.
//
//	cd bench && go build -o /tmp/submitcost ./cmd/submitcost
//	valgrind --tool=callgrind --toggle-collect='main.measured' /tmp/submitcost -c jobs -n 2000
//	/tmp/submitcost -c sql-lean -n 20000 -cpuprofile /tmp/lean.pprof
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/intentjobs/jobs/bench/perf"
)

func main() {
	name := flag.String("c", "jobs", "contender: jobs, jobs-store, sql, sql-lean or sql-lean+<choice>")
	n := flag.Int("n", 2000, "Submits measured")
	warm := flag.Int("warm", 500, "Submits before the measured ones")
	size := flag.Int("size", perf.Size1KB, "request size: 100, 1000 or 10000")
	sync := flag.String("sync", "NORMAL", "SQLite synchronous setting")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the measured Submits here")
	flag.Parse()
	if err := run(*name, *n, *warm, *size, *sync, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "submitcost:", err)
		os.Exit(1)
	}
}

func run(name string, n, warm, size int, sync, profile string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "submitcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := perf.Database{Dialect: perf.SQLite, DSN: filepath.Join(dir, "bench.db"), Synchronous: sync}
	c, err := open(ctx, db, name)
	if err != nil {
		return err
	}
	defer c.Close()
	keys := make([]string, warm+n)
	params := make([][]byte, warm+n)
	for i := range keys {
		keys[i] = perf.NewKey()
		params[i] = perf.SizedParamsFor(size, keys[i])
	}
	if err := submit(ctx, c, keys[:warm], params[:warm]); err != nil {
		return err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	if err := measured(ctx, c, keys[warm:], params[warm:]); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Printf("%s: %d Submits in %v, %.1f µs each\n", c.Name(), n, el.Round(time.Millisecond), float64(el.Microseconds())/float64(n))
	return nil
}

func open(ctx context.Context, db perf.Database, name string) (perf.Contender, error) {
	switch name {
	case "jobs":
		return perf.OpenLibrary(ctx, db)
	case perf.JobsStore, perf.JobsNoChecks:
		return perf.OpenLibraryVariant(ctx, db, name)
	case "sql":
		return perf.OpenBaseline(ctx, db, perf.CompleteInOneStatement)
	case "sql-lean":
		return perf.OpenLean(ctx, db, 0)
	}
	for _, f := range perf.LeanFeatures {
		if name == "sql-lean+"+f.Name {
			return perf.OpenLean(ctx, db, f.Feature)
		}
	}
	return nil, fmt.Errorf("no contender %q", name)
}

// measured runs the measured Submits: callgrind collects inside it.
//
//go:noinline
func measured(ctx context.Context, c perf.Contender, keys []string, params [][]byte) error {
	return submit(ctx, c, keys, params)
}

func submit(ctx context.Context, c perf.Contender, keys []string, params [][]byte) error {
	for i, k := range keys {
		_, created, err := c.Submit(ctx, "owner", k, params[i])
		if err != nil {
			return err
		}
		if !created {
			return fmt.Errorf("key %s: not created", k)
		}
	}
	return nil
}
