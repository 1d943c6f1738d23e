package jobs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The Go code in README.md and docs/*.md compiles: TestDocsCodeCompiles
// type-checks every fenced block whose info string starts with "go"
// (blocks of sh, sql, json and text are not Go, and are not checked).
//
// A block is one of:
//
//   - a whole file: it has a package clause, and is checked as it is;
//   - declarations (types, functions, variables) that compile at the top
//     level of a file;
//   - statements: anything else, compiled as the body of a function that
//     returns an error (so a block ends its error paths with return err).
//
// Declarations and statements are compiled after docsPrelude: the imports
// every page may use, the variables a page may use without declaring them
// (ctx, store, m, job, a, err, userID, key, tx, pgxTx, …) and the helpers
// that stand for the reader's own code (callProvider, isTimeout, …). A
// variable declared and not used, or an import a block does not need, is
// no error here: a block shows a step, not a whole program.
//
// A failure names the page and line of the block, as the compiler would.

// docsPrelude is what every block that is not a whole file compiles with.
const docsPrelude = `package doc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobshttp"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

var (
	ctx    context.Context
	store  jobs.SQLStore // either SQL store
	m      *jobs.Manager
	job    jobs.Job
	a      jobs.Attempt
	err    error
	dsn    string // a PostgreSQL connection string
	userID string // the owner, from the application's authentication
	key    string // the client's idempotency key
	params json.RawMessage
	result json.RawMessage

	db     *sql.DB
	sqlxDB *sqlx.DB
	tx     *sql.Tx // the application's transaction
	pgxTx  pgx.Tx  // the same, begun with pgx
	pool   *pgxpool.Pool

	w   http.ResponseWriter
	r   *http.Request
	mux *http.ServeMux

	providers         map[string]failover.Provider
	primary, fallback failover.Provider
	queue             chan string
	sampleArticle     string
)

// ChargeParams and ChargeReceipt are a typed kind's params and result.
type ChargeParams struct {
	Amount   int    ` + "`json:\"amount\"`" + `
	Currency string ` + "`json:\"currency\"`" + `
}

type ChargeReceipt struct {
	Charge string ` + "`json:\"charge\"`" + `
}

// The reader's own code.
func sendToProvider(ctx context.Context, j jobs.Job, providerKey string) (ref string, err error) { return }
func awaitResult(ctx context.Context, ref string) (json.RawMessage, error)                     { return nil, nil }
func callModel(ctx context.Context, provider, input string) (json.RawMessage, error)           { return nil, nil }
func isTimeout(err error) bool                                                               { return false }
func userFrom(r *http.Request) (string, bool)                                                 { return "", false }
func newMyStore(t testing.TB) jobs.Store                                                      { return nil }

var (
	_ = errors.New
	_ = fmt.Sprint
	_ = slog.Default
	_ = os.Getenv
	_ = time.Second
	_ = stdlib.OpenDBFromPool
	_ = faultstore.New
	_ = history.Record
	_ = invariant.Check
	_ = jobshttp.New
	_ = jobstest.Run
	_ = memstore.New
)
`

// docBlock is one fenced block of Go in a page.
type docBlock struct {
	page string // relative to the module's root, e.g. "docs/guide.md"
	line int    // the line of the block's first line of code
	code string
}

// docPages returns README.md and every page of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md"}, pages...)
	if len(pages) < 2 {
		t.Fatalf("no pages in docs/: found %v", pages)
	}
	return pages
}

var fenceRE = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^`\\s]*)")

// goBlocks returns the fenced blocks of page whose info string starts with
// "go", each without the indentation of its fence (a block in a list item).
func goBlocks(t *testing.T, page string) []docBlock {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []docBlock
		open   bool
		fence  string
		indent int
		isGo   bool
		cur    docBlock
		lines  []string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !open {
			if mt := fenceRE.FindStringSubmatch(line); mt != nil {
				open, indent, fence = true, len(mt[1]), mt[2]
				isGo = mt[3] == "go"
				cur, lines = docBlock{page: filepath.ToSlash(page), line: n + 1}, nil
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			open = false
			if isGo {
				cur.code = strings.Join(lines, "\n") + "\n"
				blocks = append(blocks, cur)
			}
			continue
		}
		lines = append(lines, dedent(line, indent))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if open {
		t.Errorf("%s:%d: a fenced block that never closes", page, cur.line-1)
	}
	return blocks
}

// dedent removes up to n leading spaces from line.
func dedent(line string, n int) string {
	i := 0
	for i < n && i < len(line) && line[i] == ' ' {
		i++
	}
	return line[i:]
}

// source returns the file b compiles as, with line directives that make
// every position in it name the page and line of b.
func (b docBlock) source() string {
	directive := fmt.Sprintf("//line %s:%d\n", b.page, b.line)
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", b.code, parser.PackageClauseOnly); err == nil && f.Name != nil {
		return directive + b.code // a whole file
	}
	if _, err := parser.ParseFile(fset, "", "package doc\n"+b.code, parser.SkipObjectResolution); err == nil {
		return docsPrelude + "\n" + directive + b.code // declarations
	}
	return docsPrelude + "\nfunc _() error {\n" + directive + b.code + "\treturn nil\n}\n" // statements
}

// TestDocsCodeCompiles type-checks every Go block of README.md and
// docs/*.md (see docsPrelude for the rules). It reads the packages the
// blocks import from the export data that go list builds, with the flags
// this test binary was built with, so that the build cache serves them.
func TestDocsCodeCompiles(t *testing.T) {
	t.Parallel()
	var blocks []docBlock
	for _, page := range docPages(t) {
		blocks = append(blocks, goBlocks(t, page)...)
	}
	if len(blocks) == 0 {
		t.Fatal("no Go blocks found in README.md and docs/*.md")
	}

	fset := token.NewFileSet()
	files := make([]*ast.File, len(blocks))
	imports := map[string]bool{}
	for i, b := range blocks {
		f, err := parser.ParseFile(fset, fmt.Sprintf("block%d.go", i), b.source(), parser.SkipObjectResolution)
		if err != nil {
			var list interface{ Unwrap() []error }
			if errors.As(err, &list) {
				for _, e := range list.Unwrap() {
					t.Errorf("%v", e)
				}
			} else {
				t.Errorf("%v", err)
			}
			continue
		}
		files[i] = f
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			imports[path] = true
		}
	}

	exports := exportData(t, slices.Sorted(func(yield func(string) bool) {
		for p := range imports {
			if !yield(p) {
				return
			}
		}
	}))
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("%s: not built by the root module (a page's Go code may import the standard library, this module and its dependencies only)", path)
		}
		return os.Open(file)
	})
	checked := 0
	for i, f := range files {
		if f == nil {
			continue
		}
		conf := types.Config{
			Importer: imp,
			Error: func(err error) {
				var te types.Error
				if errors.As(err, &te) && te.Soft {
					return // declared and not used, imported and not used
				}
				t.Errorf("%v", err)
			},
		}
		conf.Check(fmt.Sprintf("doc%d", i), fset, []*ast.File{f}, nil)
		checked++
	}
	t.Logf("%d Go blocks checked", checked)
}

// exportData returns the export data files of pkgs and every package they
// depend on, by import path, from go list -export.
func exportData(t *testing.T, pkgs []string) map[string]string {
	t.Helper()
	args := []string{"list", "-e", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}\t{{if .Error}}{{.Error}}{{end}}"}
	env := os.Environ()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "-race":
				if s.Value == "true" {
					args = append(args, "-race")
				}
			case "-tags":
				args = append(args, "-tags", s.Value)
			case "CGO_ENABLED":
				env = append(env, "CGO_ENABLED="+s.Value)
			}
		}
	}
	args = append(args, pkgs...)
	cmd := exec.Command(goTool(t), args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		file, problem, _ := strings.Cut(rest, "\t")
		if problem != "" {
			t.Errorf("go list %s: %s", path, problem)
		}
		if file != "" {
			exports[path] = file
		}
	}
	return exports
}

// goTool returns the go command that built this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no go command: %v", err)
	}
	return p
}

// TestDocsCodeIsFormatted checks that every Go block of README.md and
// docs/*.md is as gofmt would print it (a block of statements as gofmt
// prints a function's body, one tab less).
func TestDocsCodeIsFormatted(t *testing.T) {
	t.Parallel()
	for _, page := range docPages(t) {
		for _, b := range goBlocks(t, page) {
			got, err := b.formatted()
			if err != nil {
				continue // TestDocsCodeCompiles reports it
			}
			if got != b.code {
				want, have := strings.Split(got, "\n"), strings.Split(b.code, "\n")
				n := 0
				for n < len(want) && n < len(have) && want[n] == have[n] {
					n++
				}
				t.Errorf("%s:%d: not gofmt'ed; gofmt prints:\n%s", b.page, b.line+n, strings.Join(want[n:min(n+3, len(want))], "\n"))
			}
		}
	}
}

// formatted returns b's code as gofmt prints it.
func (b docBlock) formatted() (string, error) {
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", b.code, parser.PackageClauseOnly); err == nil && f.Name != nil {
		out, err := format.Source([]byte(b.code))
		return string(out), err
	}
	if out, err := format.Source([]byte("package doc\n\n" + b.code)); err == nil {
		return strings.TrimPrefix(string(out), "package doc\n\n"), nil
	}
	out, err := format.Source([]byte("package doc\n\nfunc _() {\n" + b.code + "}\n"))
	if err != nil {
		return "", err
	}
	body := strings.TrimPrefix(string(out), "package doc\n\nfunc _() {\n")
	body = strings.TrimSuffix(body, "}\n")
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(lines, "\n"), nil
}

// TestDocsLinks checks that every relative link of README.md and
// docs/*.md leads to a file of the repository, and every #fragment to a
// heading of its page.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("`[^`]*`")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		a, err := headingAnchors(page)
		anchors[page] = a
		return a, err
	}
	for _, page := range docPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for n, line := range strings.Split(string(data), "\n") {
			if fenceRE.MatchString(line) {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, mt := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := mt[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				if file == "" {
					file = page
				} else {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %s: %v", page, n+1, target, err)
					continue
				}
				if frag == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				a, err := anchorsOf(file)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", page, n+1, target, err)
					continue
				}
				if !a[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", page, n+1, target, file, frag)
				}
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of page.
func headingAnchors(page string) (map[string]bool, error) {
	data, err := os.ReadFile(page)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	anchors := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, nil
}

// TestDocsREADME checks the door: at most 300 lines, opening with the two
// commands a newcomer runs first.
func TestDocsREADME(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines; keep it to 300, and move depth to docs/", n)
	}
	first := strings.Index(string(data), "```")
	if first < 0 {
		t.Fatal("README.md has no code block")
	}
	block, _, _ := strings.Cut(string(data[first:]), "\n```")
	for _, cmd := range []string{"go run ./examples/doubleclick", "go test -race ./..."} {
		if !strings.Contains(block, "\n"+cmd+" ") {
			t.Errorf("README.md's first block does not start a line with %q:\n%s", cmd, block)
		}
	}
}
