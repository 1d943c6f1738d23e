// Command submitcost runs Submits of new keys, one after another, on one
// contender in a SQLite file of its own, so that a profiler that counts
// instructions (valgrind's callgrind) or a CPU profile can price each part
// of a Submit, free of the noise of a shared machine: the instructions of a
// run of n+1 Submits, less those of a run of 1, are n Submits'.
//
//	cd bench && go build -o /tmp/submitcost ./cmd/submitcost
//	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind /tmp/submitcost -c jobs -n 2001
//	/tmp/submitcost -c sql-lean -n 20000 -cpuprofile /tmp/lean.pprof
//	/tmp/submitcost -c sql-lean,jobs -n 20000 -rounds 20   # interleaved, each in a file of its own
//
// With several contenders, each runs n Submits in rounds, one contender
// after another in every round (the order rotating), and the time per
// Submit is reported for each, with its ratio to the first's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
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
	rounds := flag.Int("rounds", 10, "rounds, with several contenders")
	goroutines := flag.Int("g", 1, "goroutines submitting at once, with several contenders")
	flag.Parse()
	var err error
	if names := strings.Split(*name, ","); len(names) > 1 {
		err = interleave(names, *n, *warm, *size, *sync, *rounds, *goroutines)
	} else {
		err = run(*name, *n, *warm, *size, *sync, *profile, *goroutines)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "submitcost:", err)
		os.Exit(1)
	}
}

func run(name string, n, warm, size int, synchronous, profile string, goroutines int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "submitcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := perf.Database{Dialect: perf.SQLite, DSN: filepath.Join(dir, "bench.db"), Synchronous: synchronous}
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
	if err := measured(ctx, c, keys[warm:], params[warm:], goroutines); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Printf("%s: %d Submits in %v, %.1f µs each\n", c.Name(), n, el.Round(time.Millisecond), float64(el.Microseconds())/float64(n))
	return nil
}

// interleave runs the contenders in rounds and reports each one's time per
// Submit.
func interleave(names []string, n, warm, size int, synchronous string, rounds, goroutines int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "submitcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cs := make([]perf.Contender, len(names))
	for i, name := range names {
		db := perf.Database{Dialect: perf.SQLite, DSN: filepath.Join(dir, fmt.Sprintf("c%d.db", i)), Synchronous: synchronous}
		if cs[i], err = open(ctx, db, name); err != nil {
			return err
		}
		defer cs[i].Close()
	}
	per := max(1, n/rounds)
	elapsed := make([]time.Duration, len(cs))
	batch := func(c perf.Contender, count int) (time.Duration, error) {
		keys := make([]string, count)
		params := make([][]byte, count)
		for i := range keys {
			keys[i] = perf.NewKey()
			params[i] = perf.SizedParamsFor(size, keys[i])
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		start := time.Now()
		for range goroutines {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= count {
						return
					}
					if err := submit(ctx, c, keys[i:i+1], params[i:i+1]); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		close(errs)
		return el, <-errs
	}
	for _, c := range cs {
		if _, err := batch(c, warm); err != nil {
			return err
		}
	}
	for r := range rounds {
		for j := range cs {
			i := (j + r) % len(cs)
			el, err := batch(cs[i], per)
			if err != nil {
				return err
			}
			elapsed[i] += el
		}
	}
	for i, c := range cs {
		us := float64(elapsed[i].Nanoseconds()) / 1e3 / float64(per*rounds)
		fmt.Printf("%-28s %7.1f µs/Submit  throughput ×%.2f of %s\n", c.Name(), us,
			float64(elapsed[0])/float64(elapsed[i]), cs[0].Name())
	}
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

// measured runs the measured Submits from goroutines goroutines.
func measured(ctx context.Context, c perf.Contender, keys []string, params [][]byte, goroutines int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				if err := submit(ctx, c, keys[i:i+1], params[i:i+1]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
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
