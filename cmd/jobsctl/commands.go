package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/invariant"
)

// show prints a job and its attempts as a timeline.
func (c *cli) show(ctx context.Context, args []string) error {
	var owner, key string
	fs, err := c.subcommand("show", args, -1, func(fs *flag.FlagSet) {
		fs.StringVar(&owner, "owner", "", "find the job by owner and --key")
		fs.StringVar(&key, "key", "", "the idempotency key, with --owner")
	})
	if err != nil {
		return err
	}
	switch {
	case (owner == "") != (key == ""):
		return usagef("show: --owner and --key go together")
	case owner == "" && fs.NArg() != 1:
		return usagef("show needs a job or attempt ID, or --owner and --key")
	case owner != "" && fs.NArg() != 0:
		return usagef("show: give an ID or --owner and --key, not both")
	}
	return c.withStore(ctx, openChecked, func(ctx context.Context, s jobs.SQLStore, m *jobs.Manager) error {
		var j jobs.Job
		var err error
		switch id := fs.Arg(0); {
		case owner != "":
			j, err = m.GetByKey(ctx, owner, key)
		case strings.HasPrefix(id, "att_"):
			var a jobs.Attempt
			if a, err = m.Attempt(ctx, id); err == nil {
				j, err = m.Get(ctx, a.JobID)
			}
		default:
			j, err = m.Get(ctx, id)
		}
		if err != nil {
			return err
		}
		as, err := m.Attempts(ctx, j.ID)
		if err != nil {
			return err
		}
		// The job whose key this one took over, if any (key reuse).
		var replaces string
		switch prev, err := m.Replaced(ctx, j.ID); {
		case err == nil:
			replaces = prev.ID
		case !errors.Is(err, jobs.ErrNotFound):
			return err
		}
		tl := timeline(j, as)
		if c.json {
			return c.printJSON(struct {
				Job      jobs.Job       `json:"job"`
				Replaces string         `json:"replaces,omitempty"`
				Attempts []jobs.Attempt `json:"attempts"`
				Timeline []step         `json:"timeline"`
			}{j, replaces, as, tl})
		}
		c.printJob(j, replaces, as, tl)
		return nil
	})
}

// step is one line of a job's timeline.
type step struct {
	At      time.Time     `json:"at"`
	Offset  time.Duration `json:"offset_ns"` // since the job was created
	Attempt int           `json:"attempt,omitempty"`
	What    string        `json:"what"`
	order   int
}

// timeline reconstructs what happened to a job from its rows: creation,
// each attempt's start, its last change if it is still open, its end, and
// the job's end.
func timeline(j jobs.Job, as []jobs.Attempt) []step {
	var out []step
	add := func(at time.Time, attempt, order int, format string, args ...any) {
		out = append(out, step{At: at, Offset: at.Sub(j.CreatedAt), Attempt: attempt, What: fmt.Sprintf(format, args...), order: order})
	}
	add(j.CreatedAt, 0, 0, "job created: %s on %s for %s (key %s)", j.Kind, j.Provider, j.Owner, j.Key)
	for _, a := range as {
		hedge := ""
		if a.Hedge {
			hedge = " (hedge)"
		}
		add(a.CreatedAt, a.Seq, 1, "attempt %d started on %s%s", a.Seq, a.Provider, hedge)
		switch {
		case a.State.Terminal():
			note := because(a.Reason)
			if a.State == jobs.AttemptLost {
				note = ": result dropped"
			}
			add(a.FinishedAt, a.Seq, 2, "attempt %d %s after %s%s", a.Seq, outcome(j, as, a), dur(a.FinishedAt.Sub(a.CreatedAt)), note)
		case a.State == jobs.AttemptStarting:
			// nothing since it started
		default:
			add(a.UpdatedAt, a.Seq, 2, "attempt %d %s%s%s, still open", a.Seq, a.State, ref(a.ProviderRef), because(a.Reason))
		}
	}
	if j.State.Terminal() {
		what := "job " + string(j.State)
		if j.State == jobs.JobSucceeded {
			what += ", won by attempt " + seqOf(as, j.CompletedBy)
		}
		add(j.ClosedAt, 0, 3, "%s%s", what, because(j.Reason))
	}
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].At.Equal(out[b].At) {
			return out[a].At.Before(out[b].At)
		}
		return out[a].order < out[b].order
	})
	return out
}

// outcome says how a finished attempt ended, naming the winner for a loser.
func outcome(j jobs.Job, as []jobs.Attempt, a jobs.Attempt) string {
	switch a.State {
	case jobs.AttemptSucceeded:
		return "won" + ref(a.ProviderRef)
	case jobs.AttemptLost:
		return "lost to attempt " + seqOf(as, j.CompletedBy) + ref(a.ProviderRef)
	}
	return string(a.State) + ref(a.ProviderRef)
}

func seqOf(as []jobs.Attempt, id string) string {
	for _, a := range as {
		if a.ID == id {
			return fmt.Sprintf("%d (%s)", a.Seq, id)
		}
	}
	return id
}

func ref(r string) string {
	if r == "" {
		return ""
	}
	return " [ref " + r + "]"
}

func because(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// dur prints a duration rounded for people.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// stampLayout is how text output prints a time, always in UTC and saying
// so; JSON output has RFC 3339.
const stampLayout = "2006-01-02 15:04:05.000 UTC"

// stamp prints a time for people.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(stampLayout)
}

// stampText prints a time recorded as RFC 3339 text, as stamp does; text
// that is not RFC 3339 is printed as it is.
func stampText(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return stamp(t)
}

// human prints a duration as an operator would type it: 24h, not 24h0m0s.
func human(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// plural counts n of a noun: "1 job", "2 jobs".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (c *cli) printJob(j jobs.Job, replaces string, as []jobs.Attempt, tl []step) {
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "job\t%s\n", j.ID)
	fmt.Fprintf(w, "state\t%s (version %d)\n", j.State, j.Version)
	fmt.Fprintf(w, "owner / key\t%s / %s\n", j.Owner, j.Key)
	if j.ReplacedBy != "" {
		fmt.Fprintf(w, "replaced by\tjob %s, which holds the key now\n", j.ReplacedBy)
	}
	if replaces != "" {
		fmt.Fprintf(w, "replaces\tjob %s, whose key it took over\n", replaces)
	}
	fmt.Fprintf(w, "kind / provider\t%s / %s\n", j.Kind, j.Provider)
	fmt.Fprintf(w, "params\t%s\n", j.Params)
	if j.CompletedBy != "" {
		fmt.Fprintf(w, "won by\tattempt %s\n", seqOf(as, j.CompletedBy))
		fmt.Fprintf(w, "result\t%s\n", j.Result)
	}
	if j.Reason != "" {
		fmt.Fprintf(w, "reason\t%s\n", j.Reason)
	}
	fmt.Fprintf(w, "created\t%s\n", stamp(j.CreatedAt))
	if !j.ClosedAt.IsZero() {
		fmt.Fprintf(w, "closed\t%s (%s after creation)\n", stamp(j.ClosedAt), dur(j.ClosedAt.Sub(j.CreatedAt)))
	}
	w.Flush()

	if len(as) > 0 {
		fmt.Fprintln(c.out)
		w = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "#\tATTEMPT\tPROVIDER\tSTATE\tREF\tSTARTED\tTOOK\tNOTE")
		for _, a := range as {
			took := "-"
			if !a.FinishedAt.IsZero() {
				took = dur(a.FinishedAt.Sub(a.CreatedAt))
			}
			note := a.Reason
			switch {
			case a.State == jobs.AttemptSucceeded:
				note = "winner"
			case a.State == jobs.AttemptLost:
				note = "lost to attempt " + seqOf(as, j.CompletedBy) + ": result dropped"
			}
			if a.Hedge {
				note = strings.TrimPrefix(note+"; hedge", "; ")
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t+%s\t%s\t%s\n", a.Seq, a.ID, a.Provider, a.State, orDash(a.ProviderRef),
				dur(a.CreatedAt.Sub(j.CreatedAt)), took, note)
		}
		w.Flush()
	}

	fmt.Fprintln(c.out)
	w = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tOFFSET\tWHAT")
	for _, s := range tl {
		fmt.Fprintf(w, "%s\t+%s\t%s\n", stamp(s.At), dur(s.Offset), s.What)
	}
	w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// staleAttempt is a row of the stale command.
type staleAttempt struct {
	jobs.Attempt
	Silent time.Duration `json:"silent_for_ns"`
}

// stale lists attempts that are unknown, or open and silent for too long.
func (c *cli) stale(ctx context.Context, args []string) error {
	olderThan := 5 * time.Minute
	limit := 100
	if _, err := c.subcommand("stale", args, 0, func(fs *flag.FlagSet) {
		fs.DurationVar(&olderThan, "older-than", olderThan, "starting or running attempts not updated for this long")
		fs.IntVar(&limit, "limit", limit, "list at most this many, least recently updated first")
	}); err != nil {
		return err
	}
	if olderThan < 0 || limit <= 0 {
		return usagef("stale: --older-than must not be negative and --limit must be positive")
	}
	return c.withStore(ctx, openChecked, func(ctx context.Context, s jobs.SQLStore, _ *jobs.Manager) error {
		now := time.Now()
		// Every unknown attempt, whatever its age; open ones only when
		// silent. One more than the limit tells whether some were left out.
		as, err := s.StaleAttempts(ctx, jobs.StaleQuery{UnknownBefore: now, OpenBefore: now.Add(-olderThan), Limit: min(limit, math.MaxInt-1) + 1})
		if err != nil {
			return err
		}
		more := len(as) > limit
		as = as[:min(len(as), limit)]
		rows := make([]staleAttempt, len(as))
		for i, a := range as {
			rows[i] = staleAttempt{a, now.Sub(a.UpdatedAt)}
		}
		if c.json {
			return c.printJSON(rows)
		}
		if len(rows) == 0 {
			fmt.Fprintf(c.out, "no attempt unknown, or open with no news for %s\n", olderThan)
			return nil
		}
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ATTEMPT\tJOB\t#\tPROVIDER\tSTATE\tREF\tSILENT FOR\tREASON")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.JobID, r.Seq, r.Provider, r.State,
				orDash(r.ProviderRef), dur(r.Silent.Round(time.Second)), r.Reason)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(c.out, "the %d least recently updated shown; there are more (raise --limit)\n", limit)
		}
		return nil
	})
}

// cancel cancels an attempt out of band.
func (c *cli) cancel(ctx context.Context, args []string) error {
	var reason string
	fs, err := c.subcommand("cancel", args, 1, func(fs *flag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why (required; recorded on the attempt)")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return usagef("cancel: --reason is required")
	}
	return c.withStore(ctx, openChecked, func(ctx context.Context, s jobs.SQLStore, m *jobs.Manager) error {
		a, err := m.Cancel(ctx, fs.Arg(0), reason)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(a)
		}
		fmt.Fprintf(c.out, "attempt %s (job %s, #%d) is %s: %s\n", a.ID, a.JobID, a.Seq, a.State, a.Reason)
		return nil
	})
}

// violation is a broken invariant as check --json prints it.
type violation struct {
	Rule   string `json:"rule"`
	JobID  string `json:"job_id"`
	Detail string `json:"detail"`
}

// check runs the invariant checker over the whole database.
func (c *cli) check(ctx context.Context, args []string) error {
	if _, err := c.subcommand("check", args, 0, nil); err != nil {
		return err
	}
	return c.withStore(ctx, openChecked, func(ctx context.Context, s jobs.SQLStore, _ *jobs.Manager) error {
		snap, err := invariant.TakeSnapshot(ctx, s)
		if err != nil {
			return err
		}
		vs := snap.Check()
		attempts := 0
		for _, as := range snap.Attempts {
			attempts += len(as)
		}
		if c.json {
			rows := make([]violation, len(vs))
			for i, v := range vs {
				rows[i] = violation(v)
			}
			err = c.printJSON(struct {
				Jobs       int         `json:"jobs"`
				Attempts   int         `json:"attempts"`
				Violations []violation `json:"violations"`
			}{len(snap.Jobs), attempts, rows})
		} else {
			w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			if len(vs) > 0 {
				fmt.Fprintln(w, "RULE\tJOB\tDETAIL")
				for _, v := range vs {
					fmt.Fprintf(w, "%s\t%s\t%s\n", v.Rule, v.JobID, v.Detail)
				}
			}
			w.Flush()
			fmt.Fprintf(c.out, "%d jobs and %d attempts checked: %d violations\n", len(snap.Jobs), attempts, len(vs))
		}
		if err == nil && len(vs) > 0 {
			return errFound
		}
		return err
	})
}

// purge deletes old terminal jobs.
//
// A job's key guards against duplicates for as long as the service keeps
// the job: its advertised retention (jobs.Options.Retention, which jobsctl
// learns from --retention). Purging sooner lets a client's replay of a key
// it was promised is still known make a second job, so it takes --force.
func (c *cli) purge(ctx context.Context, args []string) error {
	var o jobs.PurgeOptions
	var olderThan time.Duration
	retention := jobs.DefaultRetention
	force := false
	fs, err := c.subcommand("purge", args, 0, func(fs *flag.FlagSet) {
		fs.DurationVar(&retention, "retention", retention, "the retention the service advertises (its jobs.Options.Retention)")
		fs.DurationVar(&olderThan, "older-than", 0, "purge jobs closed longer ago than this (default --retention)")
		fs.BoolVar(&force, "force", false, "purge even with --older-than below --retention")
		fs.IntVar(&o.BatchSize, "batch-size", jobs.DefaultPurgeBatchSize, "jobs per delete")
		fs.BoolVar(&o.DryRun, "dry-run", false, "count, delete nothing")
	})
	if err != nil {
		return err
	}
	if !isSet(fs, "older-than") {
		olderThan = retention
	}
	switch {
	case retention <= 0:
		return usagef("purge: --retention must be positive")
	case olderThan <= 0:
		return usagef("purge: --older-than must be positive")
	case o.BatchSize <= 0 || o.BatchSize > jobs.MaxPurgeBatchSize:
		return usagef("purge: --batch-size must be between 1 and %d", jobs.MaxPurgeBatchSize)
	case olderThan < retention && !force && !o.DryRun:
		return usagef("purge: refused: --older-than %s is below the %s retention the service advertises, "+
			"so a key replayed within %s of its job closing would make a second job; "+
			"give --force to purge anyway, or --retention if the service keeps keys for less",
			human(olderThan), human(retention), human(retention))
	}
	o.Retention = olderThan
	return c.withStore(ctx, openChecked, func(ctx context.Context, s jobs.SQLStore, m *jobs.Manager) error {
		res, err := m.Purge(ctx, o)
		if err != nil {
			var in *jobs.InputError
			if errors.As(err, &in) {
				return usagef("purge: %s", in.Error())
			}
			if res.Jobs > 0 {
				return fmt.Errorf("%w (after purging %s)", err, plural(res.Jobs, "job"))
			}
			return err
		}
		if c.json {
			return c.printJSON(res)
		}
		verb := "purged"
		if res.DryRun {
			verb = "would purge"
		}
		fmt.Fprintf(c.out, "%s %s and %s closed before %s\n", verb, plural(res.Jobs, "job"), plural(res.Attempts, "attempt"), stamp(res.Cutoff))
		if !res.DryRun {
			batches := "batches"
			if res.Batches == 1 {
				batches = "batch"
			}
			fmt.Fprintf(c.out, "%d %s in %s\n", res.Batches, batches, dur(res.Duration))
		}
		return nil
	})
}

// isSet reports whether the named flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// schemaReport is the output of the schema command.
type schemaReport struct {
	Database int                     `json:"database_version"`
	Library  int                     `json:"library_version"`
	Status   string                  `json:"status"` // up to date, behind, ahead
	Applied  []jobs.AppliedMigration `json:"applied"`
	Missing  []string                `json:"missing"`
}

// schema reports the schema version of the database and of this binary,
// and fails (exit status 1) when they differ.
func (c *cli) schema(ctx context.Context, args []string) error {
	if _, err := c.subcommand("schema", args, 0, nil); err != nil {
		return err
	}
	return c.withStore(ctx, openInspect, func(ctx context.Context, s jobs.SQLStore, _ *jobs.Manager) error {
		return c.reportSchema(ctx, s)
	})
}

// migrate applies the missing migrations.
func (c *cli) migrate(ctx context.Context, args []string) error {
	force := false
	if _, err := c.subcommand("migrate", args, 0, func(fs *flag.FlagSet) {
		fs.BoolVar(&force, "force", false, "apply the migrations even where another tool records them")
	}); err != nil {
		return err
	}
	if !force {
		// A look first, changing nothing: if goose or golang-migrate
		// applied the schema so far, the rest is theirs to apply too.
		err := c.withStore(ctx, openInspect, func(ctx context.Context, s jobs.SQLStore, _ *jobs.Manager) error {
			return refuseForeignMigrations(ctx, s)
		})
		if err != nil {
			return err
		}
	}
	return c.withStore(ctx, openMigrate, func(ctx context.Context, s jobs.SQLStore, _ *jobs.Manager) error {
		return c.reportSchema(ctx, s)
	})
}

// migrationTool is a migration tool that records what it applied in a
// table of its own, read here as each tool creates it by default.
type migrationTool struct {
	name, table, latest, command string
}

var migrationTools = []migrationTool{
	{"goose", "goose_db_version", `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`, "goose up"},
	{"golang-migrate", "schema_migrations", `SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE NOT dirty`, "migrate up"},
}

// refuseForeignMigrations refuses, with a usage error, to apply missing
// migrations to a database whose schema another tool applied so far: one
// that records, in its own table, the same latest version as
// intentjobs_schema_migrations. jobsctl would apply the rest without that tool
// knowing, and the tool would then run them again.
func refuseForeignMigrations(ctx context.Context, s jobs.SQLStore) error {
	current, err := s.DatabaseSchemaVersion(ctx)
	if err != nil {
		return err
	}
	all, err := jobs.MigrationList(s.Dialect())
	if err != nil || current == 0 || current >= len(all) {
		return err // nothing applied yet, or nothing to apply
	}
	for _, tool := range migrationTools {
		var v int64
		if err := s.DB().QueryRowContext(ctx, tool.latest).Scan(&v); err != nil || v != int64(current) {
			continue // no such table, or it records something else
		}
		return usagef("migrate: refused: the schema is at version %d, which %s records in %s too: it applied "+
			"the migrations so far, so apply the rest with it (%s), or it would run them again after jobsctl; "+
			"give --force to apply them here anyway", current, tool.name, tool.table, tool.command)
	}
	return nil
}

// reportSchema prints where the database's schema stands, and returns
// errFound unless it is this jobsctl's.
func (c *cli) reportSchema(ctx context.Context, s jobs.SQLStore) error {
	applied, err := s.AppliedMigrations(ctx)
	if err != nil {
		return err
	}
	all, err := jobs.MigrationList(s.Dialect())
	if err != nil {
		return err
	}
	r := schemaReport{Library: len(all), Applied: applied, Missing: []string{}}
	if r.Applied == nil {
		r.Applied = []jobs.AppliedMigration{}
	}
	if n := len(applied); n > 0 {
		r.Database = applied[n-1].Version
	}
	for _, m := range all[min(r.Database, len(all)):] {
		r.Missing = append(r.Missing, m.Name)
	}
	switch {
	case r.Database == r.Library:
		r.Status = "up to date"
	case r.Database < r.Library:
		r.Status = "behind"
	default:
		r.Status = "ahead"
	}
	if c.json {
		err = c.printJSON(r)
	} else {
		c.printSchema(s.Dialect(), r)
	}
	if err == nil && r.Status != "up to date" {
		return errFound
	}
	return err
}

// printSchema prints the report as text: the versions, a status line that
// says what to do when they differ, and the migrations applied.
func (c *cli) printSchema(dialect jobs.Dialect, r schemaReport) {
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "database\t%s, schema version %d\n", dialect, r.Database)
	fmt.Fprintf(w, "jobsctl\tschema version %d\n", r.Library)
	switch r.Status {
	case "up to date":
		fmt.Fprintf(w, "status\tup to date\n")
	case "behind":
		fmt.Fprintf(w, "status\tbehind: %s missing; run jobsctl migrate (or open the store from the new release)\n", strings.Join(r.Missing, ", "))
	default:
		fmt.Fprintf(w, "status\tahead: the database was upgraded by a newer release; use a newer jobsctl\n")
	}
	w.Flush()
	if len(r.Applied) > 0 {
		fmt.Fprintln(c.out)
		w = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VERSION\tMIGRATION\tAPPLIED AT")
		for _, m := range r.Applied {
			fmt.Fprintf(w, "%d\t%s\t%s\n", m.Version, m.Name, stampText(m.AppliedAt))
		}
		w.Flush()
	}
}
