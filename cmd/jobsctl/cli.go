package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

const usage = `Usage: jobsctl [--sqlite PATH | --postgres DSN [--postgres-schema NAME]] [--json] [--timeout D] COMMAND [ARGS]

Commands:
  show JOB_ID | ATTEMPT_ID          a job and its attempts, as a timeline
  show --owner OWNER --key KEY      the same, found by owner and idempotency key
  list [FILTERS] [--oldest] [--after JOB_ID] [--limit 50]
                                    jobs, newest first, a page at a time; FILTERS are
                                    --owner O --state S,S --kind K --provider P
                                    --newer-than AGE --older-than AGE (90m, 36h, 7d)
  count [FILTERS]                   how many jobs the same filters select
  stale [--older-than 5m] [--limit 100]
                                    attempts unknown, or starting/running with no news for
                                    --older-than; at most --limit of them, least recent first
  cancel ATTEMPT_ID --reason TEXT   cancel an attempt out of band; the reason is recorded
  check                             check the invariants; exit status 1 if any is violated
  purge [--retention 24h] [--older-than D] [--force] [--batch-size 500] [--dry-run]
                                    delete terminal jobs closed longer ago than --older-than
                                    (default: --retention, the retention the service advertises,
                                    its jobs.Options.Retention); below --retention a replayed key
                                    would make a second job, so that needs --force
  schema                            the database's schema version and this jobsctl's;
                                    exit status 1 if the database is behind or ahead
  migrate [--force]                 apply the migrations the database is missing; refused where
                                    goose or golang-migrate applied the schema so far (they would
                                    run the rest again), unless --force

The database: --sqlite PATH, --postgres DSN (a postgres:// or postgresql:// URL, or
key=value such as "host=db dbname=app user=jobs"), or JOBS_DSN: any of those forms,
sqlite:PATH, or a SQLite file path starting with /, ./ or ../. --postgres-schema names the
schema of the store's tables, for a service that opens its store with jobs.Schema(NAME);
without it, they are where the connection's search_path finds them.
Output is aligned text, times in UTC as 2026-12-02 14:29:34.000 UTC; --json prints JSON
instead, in snake_case, times in RFC 3339.
Exit status: 0 ok, 1 failed or found a problem, 2 bad arguments or a refused purge.
`

// exit codes
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	defaultWait = 30 * time.Second
)

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errFound means the command ran and found a problem: exit status 1, its
// output already printed.
var errFound = errors.New("problems found")

// cli holds the global options and the output streams.
type cli struct {
	sqlite   string
	postgres string
	pgSchema string // --postgres-schema: jobs.Schema
	json     bool
	timeout  time.Duration
	getenv   func(string) string
	out      io.Writer
}

// commonFlags registers the options every command accepts, so that they
// may come before or after the command's name.
func (c *cli) commonFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.sqlite, "sqlite", c.sqlite, "path of the SQLite database file")
	fs.StringVar(&c.postgres, "postgres", c.postgres, "PostgreSQL connection string")
	fs.StringVar(&c.pgSchema, "postgres-schema", c.pgSchema, "PostgreSQL schema of the store's tables (jobs.Schema)")
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "give up after this long")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{timeout: defaultWait, getenv: getenv, out: stdout}
	err := c.run(ctx, args)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "jobsctl: %s (see jobsctl --help)\n", message(ue))
		return exitUsage
	case errors.Is(err, errFound):
		return exitFailed
	default:
		fmt.Fprintf(stderr, "jobsctl: %s\n", message(err))
		return exitFailed
	}
}

// message is err's text on one line, without the "jobs: " that the
// library puts before each error it makes, at every layer: after jobsctl's
// own prefix it would only repeat itself ("jobs: job X: jobs: not found").
func message(err error) string {
	parts := strings.Split(strings.Join(strings.Fields(err.Error()), " "), ": ")
	kept := parts[:0]
	for i, p := range parts {
		if p == "jobs" && i < len(parts)-1 {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ": ")
}

func (c *cli) run(ctx context.Context, args []string) error {
	fs := newFlagSet("jobsctl")
	c.commonFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("no command given")
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	cmds := map[string]func(context.Context, []string) error{
		"show":    c.show,
		"stale":   c.stale,
		"list":    c.list,
		"count":   c.count,
		"cancel":  c.cancel,
		"check":   c.check,
		"purge":   c.purge,
		"schema":  c.schema,
		"migrate": c.migrate,
		"help":    func(context.Context, []string) error { return flag.ErrHelp },
	}
	cmd, ok := cmds[name]
	if !ok {
		return usagef("unknown command %q", name)
	}
	return cmd(ctx, rest)
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run, in one line
	return fs
}

// parse parses flags wherever they are among the arguments (flag alone
// stops at the first one that is not a flag), keeping the others in order.
func parse(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
		if fs.Name() == "jobsctl" {
			// The global flag set stops at the command's name: the rest
			// belongs to the command.
			positional = append(positional, args...)
			break
		}
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// subcommand parses a command's arguments, with want positional arguments
// (any number if want is negative).
func (c *cli) subcommand(name string, args []string, want int, setup func(fs *flag.FlagSet)) (*flag.FlagSet, error) {
	fs := newFlagSet(name)
	c.commonFlags(fs)
	if setup != nil {
		setup(fs)
	}
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if want >= 0 && fs.NArg() != want {
		if want == 0 {
			return nil, usagef("%s takes no arguments, got %q", name, fs.Args())
		}
		return nil, usagef("%s needs %d argument(s), got %d", name, want, fs.NArg())
	}
	return fs, nil
}

// target is the database the options name.
type target struct {
	dialect string // "sqlite" or "postgres"
	dsn     string
}

func (c *cli) target() (target, error) {
	switch {
	case c.sqlite != "" && c.postgres != "":
		return target{}, usagef("give --sqlite or --postgres, not both")
	case c.sqlite != "":
		return target{"sqlite", c.sqlite}, nil
	case c.postgres != "":
		return target{"postgres", c.postgres}, nil
	}
	env := c.getenv("JOBS_DSN")
	if env == "" {
		return target{}, usagef("no database: give --sqlite PATH or --postgres DSN, or set JOBS_DSN")
	}
	return parseDSN(env)
}

// keyValueDSN matches a PostgreSQL connection string in key=value form,
// such as "host=127.0.0.1 dbname=test user=postgres".
var keyValueDSN = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// parseDSN reads the database named by JOBS_DSN: for PostgreSQL, what
// --postgres accepts (a postgres:// or postgresql:// URL, or key=value
// pairs); for SQLite, sqlite:PATH, or a path that is plainly one (absolute,
// or starting with ./ or ../), so that a mistyped URL is not taken for the
// name of a file.
func parseDSN(dsn string) (target, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"), keyValueDSN.MatchString(dsn):
		return target{"postgres", dsn}, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return target{"sqlite", strings.TrimPrefix(dsn, "sqlite:")}, nil
	case filepath.IsAbs(dsn), strings.HasPrefix(dsn, "./"), strings.HasPrefix(dsn, "../"):
		return target{"sqlite", dsn}, nil
	}
	return target{}, usagef("JOBS_DSN must be a postgres:// or postgresql:// URL, key=value pairs (host=... dbname=...), " +
		"sqlite:PATH, or a SQLite file path starting with /, ./ or ../")
}

// store opens the database named by the options. Unless migrate is set it
// neither creates nor migrates anything: an operator's look must not
// change the schema. With inspect, the schema is not checked either.
func (c *cli) store(ctx context.Context, mode openMode) (jobs.SQLStore, func(), error) {
	t, err := c.target()
	if err != nil {
		return nil, nil, err
	}
	var opts []jobs.StoreOption
	switch mode {
	case openChecked:
		opts = append(opts, jobs.SkipMigrations())
	case openInspect:
		opts = append(opts, jobs.InspectOnly())
	}
	var s jobs.SQLStore
	switch t.dialect {
	case "sqlite":
		if t.dsn == "" {
			return nil, nil, usagef("no SQLite database path given")
		}
		if c.pgSchema != "" {
			return nil, nil, usagef("--postgres-schema is for a PostgreSQL database, not SQLite")
		}
		if mode != openMigrate {
			if _, err := os.Stat(t.dsn); err != nil {
				return nil, nil, fmt.Errorf("no SQLite database at %s", t.dsn)
			}
		}
		// The library's own way in, as the service has it: its durable
		// settings (synchronous=FULL) and its write queue, whose lock file
		// beside the database makes jobsctl's writes wait their turn with
		// the service's instead of racing them. The path becomes a file:
		// URI so that no character of it reads as a parameter.
		s, err = jobs.OpenSQLite(ctx, "file:"+(&url.URL{Path: t.dsn}).EscapedPath(), sqliteOptions(opts)...)
	default:
		var db *sql.DB
		db, err = sql.Open("pgx", t.dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("bad PostgreSQL connection string: %v", err)
		}
		db.SetMaxOpenConns(2)
		pgOpts := postgresOptions(opts)
		if c.pgSchema != "" {
			pgOpts = append(pgOpts, jobs.Schema(c.pgSchema))
		}
		var pg *jobs.PostgresStore
		if pg, err = jobs.NewPostgresStore(ctx, db, pgOpts...); err != nil {
			db.Close()
		} else {
			s = pgOwning{pg, db}
		}
	}
	if err != nil {
		var se *jobs.StorageError
		if errors.As(err, &se) && se.Kind == jobs.StorageSchema && mode == openChecked {
			return nil, nil, fmt.Errorf("%v (see jobsctl schema)", err)
		}
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}

// sqliteOptions and postgresOptions pass options of both stores to one.
func sqliteOptions(opts []jobs.StoreOption) []jobs.SQLiteOption {
	out := make([]jobs.SQLiteOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func postgresOptions(opts []jobs.StoreOption) []jobs.PostgresOption {
	out := make([]jobs.PostgresOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// pgOwning is a PostgreSQL store whose Close also closes the handle
// jobsctl opened for it.
type pgOwning struct {
	*jobs.PostgresStore
	db *sql.DB
}

func (s pgOwning) Close() error { return errors.Join(s.PostgresStore.Close(), s.db.Close()) }

type openMode int

const (
	openChecked openMode = iota // the schema must be this library's
	openInspect                 // any schema, or none
	openMigrate                 // apply missing migrations
)

// withStore runs fn on the store with a Manager over it, within the
// timeout.
func (c *cli) withStore(ctx context.Context, mode openMode, fn func(ctx context.Context, s jobs.SQLStore, m *jobs.Manager) error) error {
	if _, err := c.target(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	s, closeDB, err := c.store(ctx, mode)
	if err != nil {
		return err
	}
	defer closeDB()
	// Writes that record an outcome run to their end whatever their
	// caller does, bounded by WriteTimeout: --timeout bounds them too.
	m, err := jobs.New(s, jobs.Options{WriteTimeout: c.timeout})
	if err != nil {
		return err
	}
	return fn(ctx, s, m)
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
