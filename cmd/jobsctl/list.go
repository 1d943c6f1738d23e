package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/inspect"
)

// filterFlags registers the filters of list and count, as package inspect
// reads them (the console's lists take the same).
func filterFlags(fs *flag.FlagSet, f *inspect.Filter, states, newer, older *string) {
	fs.StringVar(&f.Owner, "owner", "", "only this owner's jobs")
	fs.StringVar(states, "state", "", "only jobs in these states, comma-separated (pending,running,succeeded,failed,cancelled)")
	fs.StringVar(&f.Kind, "kind", "", "only jobs of this kind")
	fs.StringVar(&f.Provider, "provider", "", "only jobs for this (target) provider")
	fs.StringVar(newer, "newer-than", "", "only jobs created less than this long ago (90m, 36h, 7d)")
	fs.StringVar(older, "older-than", "", "only jobs created at least this long ago (90m, 36h, 7d)")
}

// readFilter completes f with the flags filterFlags left as text.
func readFilter(cmd string, f *inspect.Filter, states, newer, older string) error {
	var err error
	if f.States, err = inspect.ParseStates(states); err != nil {
		return usagef("%s: --state: %v", cmd, err)
	}
	if f.NewerThan, err = inspect.ParseAge("newer-than", newer); err != nil {
		return usagef("%s: --newer-than: %v", cmd, err)
	}
	if f.OlderThan, err = inspect.ParseAge("older-than", older); err != nil {
		return usagef("%s: --older-than: %v", cmd, err)
	}
	if err := f.Check(); err != nil {
		return usagef("%s: %v", cmd, err)
	}
	return nil
}

// jobPage is list's JSON output.
type jobPage struct {
	Jobs []jobs.Job `json:"jobs"`
	Next string     `json:"next,omitempty"` // --after for the next page
}

// list prints one page of the jobs the filters select, newest first.
func (c *cli) list(ctx context.Context, args []string) error {
	f := inspect.Filter{Limit: inspect.DefaultLimit}
	var states, newer, older string
	if _, err := c.subcommand("list", args, 0, func(fs *flag.FlagSet) {
		filterFlags(fs, &f, &states, &newer, &older)
		fs.BoolVar(&f.Oldest, "oldest", false, "oldest first")
		fs.StringVar(&f.After, "after", "", "the page after this job ID (the next page's --after is printed)")
		fs.IntVar(&f.Limit, "limit", f.Limit, "at most this many jobs")
	}); err != nil {
		return err
	}
	if f.Limit <= 0 {
		return usagef("list: --limit must be positive")
	}
	if err := readFilter("list", &f, states, newer, older); err != nil {
		return err
	}
	return c.withStore(ctx, openChecked, func(ctx context.Context, _ jobs.SQLStore, m *jobs.Manager) error {
		p, err := inspect.New(m).List(ctx, f)
		if err != nil {
			return err
		}
		if c.json {
			if p.Jobs == nil {
				p.Jobs = []jobs.Job{}
			}
			return c.printJSON(jobPage{p.Jobs, p.Next})
		}
		if len(p.Jobs) == 0 {
			fmt.Fprintln(c.out, "no job matches")
			return nil
		}
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "JOB\tOWNER\tKEY\tKIND\tPROVIDER\tSTATE\tATTEMPTS\tCREATED")
		for _, j := range p.Jobs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, j.Owner, j.Key, j.Kind, j.Provider, j.State, j.Attempts, stamp(j.CreatedAt))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if p.Next != "" {
			fmt.Fprintf(c.out, "more: --after %s\n", p.Next)
		}
		return nil
	})
}

// count prints how many jobs the filters select.
func (c *cli) count(ctx context.Context, args []string) error {
	var f inspect.Filter
	var states, newer, older string
	if _, err := c.subcommand("count", args, 0, func(fs *flag.FlagSet) {
		filterFlags(fs, &f, &states, &newer, &older)
	}); err != nil {
		return err
	}
	if err := readFilter("count", &f, states, newer, older); err != nil {
		return err
	}
	return c.withStore(ctx, openChecked, func(ctx context.Context, _ jobs.SQLStore, m *jobs.Manager) error {
		n, err := inspect.New(m).Count(ctx, f)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(struct {
				Count int64 `json:"count"`
			}{n})
		}
		fmt.Fprintln(c.out, n)
		return nil
	})
}
