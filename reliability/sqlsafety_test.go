package reliability_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// queryMethods are the database/sql methods (and the DBTX interface's)
// whose first string argument is SQL text.
var queryMethods = map[string]bool{
	"Exec": true, "ExecContext": true, "Query": true, "QueryContext": true,
	"QueryRow": true, "QueryRowContext": true, "Prepare": true, "PrepareContext": true,
}

// sqlChecker decides whether an expression that becomes SQL text is built
// from constants only. It is syntactic and deliberately strict: string
// literals, package constants, package variables initialised from those and
// never assigned again, local variables whose every assignment is safe, the
// string fields of the types that hold statements (statementHolders, each of
// whose values is checked in turn), the embedded migration files, an
// identifier quoted by pgx (pgx.Identifier{…}.Sanitize(): a schema's name,
// say, which cannot be a parameter), concatenations of those, and
// strings.Repeat of a constant (data may decide how many placeholders a
// statement has, never its text). Anything else (a variable holding data,
// fmt.Sprintf, strings.Join, a parameter whose callers pass anything else)
// is reported.
type sqlChecker struct {
	fset       *token.FileSet
	consts     map[string]bool
	pkgVars    map[string]ast.Expr // package variables with one initialiser
	assigned   map[string]bool     // names assigned to inside some function
	funcs      map[string]*ast.FuncDecl
	safeFields map[string]bool // string fields of statementHolders, filled from constants
	safeCalls  map[string]bool // pure rewriters of constant SQL
	problems   []string
}

func newSQLChecker(fset *token.FileSet, files []*ast.File) *sqlChecker {
	c := &sqlChecker{
		fset:     fset,
		consts:   map[string]bool{},
		pkgVars:  map[string]ast.Expr{},
		assigned: map[string]bool{},
		funcs:    map[string]*ast.FuncDecl{},
		safeFields: map[string]bool{
			"SQL": true, // a migration: a file embedded in the binary
		},
		safeCalls: map[string]bool{
			"qualifyTables": true, // qualifies a constant statement's tables by a schema's quoted name
		},
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.ValueSpec:
						if d.Tok == token.CONST {
							for _, n := range sp.Names {
								c.consts[n.Name] = true
							}
						}
						if d.Tok == token.VAR && len(sp.Names) == len(sp.Values) {
							for i, n := range sp.Names {
								c.pkgVars[n.Name] = sp.Values[i]
							}
						}
					case *ast.TypeSpec:
						if st, ok := sp.Type.(*ast.StructType); ok && statementHolders[sp.Name.Name] {
							for _, fld := range st.Fields.List {
								if id, ok := fld.Type.(*ast.Ident); ok && id.Name == "string" {
									for _, n := range fld.Names {
										c.safeFields[n.Name] = true
									}
								}
							}
						}
					}
				}
			case *ast.FuncDecl:
				c.funcs[d.Name.Name] = d
				ast.Inspect(d, func(n ast.Node) bool {
					if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.ASSIGN {
						for _, l := range as.Lhs {
							if id, ok := l.(*ast.Ident); ok {
								c.assigned[id.Name] = true
							}
						}
					}
					return true
				})
			}
		}
	}
	return c
}

func (c *sqlChecker) report(n ast.Node, format string, args ...any) {
	c.problems = append(c.problems, c.fset.Position(n.Pos()).String()+": "+fmt.Sprintf(format, args...))
}

// safe reports whether e is SQL built from constants. params are the
// enclosing function's parameter names, traced to its callers.
func (c *sqlChecker) safe(e ast.Expr, fn *ast.FuncDecl, files []*ast.File, depth int) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.ParenExpr:
		return c.safe(e.X, fn, files, depth)
	case *ast.BinaryExpr:
		return e.Op == token.ADD && c.safe(e.X, fn, files, depth) && c.safe(e.Y, fn, files, depth)
	case *ast.Ident:
		if c.consts[e.Name] {
			return true
		}
		if values, ok := localAssignments(fn, e.Name); ok {
			for _, v := range values {
				if depth >= 3 || !c.safe(v, fn, files, depth+1) {
					return false
				}
			}
			return true
		}
		if i := paramIndex(fn, e.Name); i >= 0 && depth < 3 {
			return c.callersPassSafe(fn.Name.Name, i, files, depth+1)
		}
		if init, ok := c.pkgVars[e.Name]; ok && !c.assigned[e.Name] && depth < 3 {
			return c.safe(init, nil, files, depth+1)
		}
		return false
	case *ast.SelectorExpr:
		return c.safeFields[e.Sel.Name]
	case *ast.CallExpr:
		if quotedIdentifier(e) {
			return true
		}
		name := ""
		switch f := e.Fun.(type) {
		case *ast.Ident:
			name = f.Name
		case *ast.SelectorExpr:
			name = f.Sel.Name
			if pkg, ok := f.X.(*ast.Ident); ok && pkg.Name == "strings" {
				switch name {
				case "Repeat": // the count may come from data, the text may not
					return len(e.Args) == 2 && c.safe(e.Args[0], fn, files, depth)
				case "TrimSuffix", "TrimPrefix":
					return len(e.Args) == 2 && c.safe(e.Args[0], fn, files, depth) && c.safe(e.Args[1], fn, files, depth)
				}
				return false
			}
		}
		if !c.safeCalls[name] {
			return false
		}
		for _, a := range e.Args {
			if !c.safe(a, fn, files, depth) {
				return false
			}
		}
		return true
	}
	return false
}

// localAssignments returns every value assigned to the local variable name
// in fn, and whether fn declares such a variable.
func localAssignments(fn *ast.FuncDecl, name string) ([]ast.Expr, bool) {
	if fn == nil || fn.Body == nil {
		return nil, false
	}
	var values []ast.Expr
	declared := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name {
					if n.Tok == token.DEFINE {
						declared = true
					}
					if len(n.Rhs) == len(n.Lhs) {
						values = append(values, n.Rhs[i])
					} else {
						values = append(values, &ast.BadExpr{}) // from a multi-value call: unknown
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name == name {
					declared = true
					if i < len(n.Values) {
						values = append(values, n.Values[i])
					}
				}
			}
		}
		return true
	})
	return values, declared
}

func paramIndex(fn *ast.FuncDecl, name string) int {
	if fn == nil {
		return -1
	}
	i := 0
	for _, f := range fn.Type.Params.List {
		for _, n := range f.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// callersPassSafe checks every call of the function named name passes a
// safe expression as argument i. For a method, every call of a method of
// that name counts, whatever its receiver: stricter than needed, never
// looser.
func (c *sqlChecker) callersPassSafe(name string, i int, files []*ast.File, depth int) bool {
	ok, calls := true, 0
	for _, f := range files {
		for _, d := range f.Decls {
			caller, _ := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				call, isCall := n.(*ast.CallExpr)
				if !isCall {
					return true
				}
				var callee string
				switch fun := call.Fun.(type) {
				case *ast.Ident:
					callee = fun.Name
				case *ast.IndexExpr: // generic instantiation
					if id, isID := fun.X.(*ast.Ident); isID {
						callee = id.Name
					}
				case *ast.SelectorExpr: // a method, of any type or interface with that name
					callee = fun.Sel.Name
				}
				if callee == name && i < len(call.Args) {
					calls++
					if !c.safe(call.Args[i], caller, files, depth) {
						ok = false
					}
				}
				return true
			})
		}
	}
	return ok && calls > 0
}

// check reports every query call in files whose SQL is not constant.
func (c *sqlChecker) check(files []*ast.File) {
	for _, f := range files {
		for _, d := range f.Decls {
			fn, _ := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !queryMethods[sel.Sel.Name] {
					return true
				}
				// database/sql's …Context methods, and pgx's Exec, Query and
				// QueryRow, take a context first.
				arg := 0
				if strings.HasSuffix(sel.Sel.Name, "Context") || len(call.Args) > 1 && isContext(call.Args[0]) {
					arg = 1
				}
				if arg >= len(call.Args) {
					return true
				}
				if !c.safe(call.Args[arg], fn, files, 0) {
					c.report(call, "%s: SQL text is not built from constants", sel.Sel.Name)
				}
				return true
			})
		}
		// The values of the statement holders: every string field from
		// constants, traced through the enclosing function's parameters.
		for _, d := range f.Decls {
			fn, _ := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if u, ok := lit.Type.(*ast.Ident); !ok || !statementHolders[u.Name] {
					return true
				}
				for _, el := range lit.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); ok && c.safeFields[k.Name] && !c.safe(kv.Value, fn, files, 0) {
						c.report(kv, "statement field %s is not built from constants", k.Name)
					}
				}
				return true
			})
		}
	}
}

// statementHolders are the library's types whose string fields hold SQL:
// a migration plan, a dialect's way from its development schema, and the
// statements of a PostgreSQL store.
var statementHolders = map[string]bool{"migrationPlan": true, "developmentSchema": true, "pgStatements": true}

// quotedIdentifier reports whether e is pgx.Identifier{…}.Sanitize(): an
// identifier quoted by pgx, which SQL reads as one name whatever it holds.
func quotedIdentifier(e *ast.CallExpr) bool {
	sel, ok := e.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Sanitize" || len(e.Args) != 0 {
		return false
	}
	lit, ok := sel.X.(*ast.CompositeLit)
	if !ok {
		return false
	}
	typ, ok := lit.Type.(*ast.SelectorExpr)
	if !ok || typ.Sel.Name != "Identifier" {
		return false
	}
	pkg, ok := typ.X.(*ast.Ident)
	return ok && pkg.Name == "pgx"
}

// isContext reports whether e looks like a context argument: a variable
// named ctx (or ending in ctx or Ctx), or a call into package context.
func isContext(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "ctx" || strings.HasSuffix(e.Name, "Ctx") || strings.HasSuffix(e.Name, "ctx")
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok {
				return pkg.Name == "context"
			}
		}
	}
	return false
}

func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// TestNoFormattedSQL scans the library's sources: every statement it runs
// is constant text with placeholders, so no user data ever becomes SQL.
func TestNoFormattedSQL(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := parseDir(t, fset, "..")
	c := newSQLChecker(fset, files)
	c.check(files)
	for _, p := range c.problems {
		t.Error(p)
	}
}

// TestNoFormattedSQLCatches shows the scan is not blind: it reports each
// way of building SQL from data.
func TestNoFormattedSQLCatches(t *testing.T) {
	t.Parallel()
	const src = `package jobs
import "fmt"
const q = "SELECT 1 FROM jobs WHERE id = $1"
type migrationPlan struct{ dialect string; begin string }
var bad = migrationPlan{begin: "BEGIN " + userCols}
func run(db DB, ctx any, key string) {
	db.QueryRowContext(ctx, q, key)                                        // fine
	db.QueryRowContext(ctx, fmt.Sprintf("SELECT * FROM jobs WHERE k = '%s'", key)) // 1
	db.ExecContext(ctx, "DELETE FROM jobs WHERE k = '" + key + "'")        // 2
	db.Query("SELECT " + key)                                              // 3
	helper(db, ctx, key)
}
func helper(db DB, ctx any, query string) { db.ExecContext(ctx, query) } // 4: its caller passes key
var fixed = "SELECT " + q
var changed = "SELECT 1"
func more(db DB, ctx any, key string, ids []any) {
	db.ExecContext(ctx, fixed)                                                  // fine
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	db.ExecContext(ctx, "DELETE FROM jobs WHERE id IN "+in, ids...)            // fine
	where := "id = $1"
	if key != "" {
		where = "key = '" + key + "'"
	}
	db.QueryContext(ctx, "SELECT 1 FROM jobs WHERE "+where)                     // 5
	changed = key
	db.ExecContext(ctx, changed)                                                // 6
	db.ExecContext(ctx, strings.Repeat(key, 2))                                 // 7
	db.ExecContext(ctx, strings.Join([]string{"SELECT", key}, " "))             // 8
	conn.Exec(ctx, "LISTEN "+q)                                                 // fine: pgx, context first
	conn.Exec(ctx, "NOTIFY jobs_closed, '"+key+"'")                             // 9
	conn.Exec(ctx, "LISTEN "+pgx.Identifier{key}.Sanitize())                    // fine: a quoted identifier
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	files := []*ast.File{f}
	c := newSQLChecker(fset, files)
	c.check(files)
	t.Log(strings.Join(c.problems, "\n"))
	if len(c.problems) != 10 {
		t.Fatalf("want 10 problems (9 calls and the migration plan field), got %d:\n%s", len(c.problems), strings.Join(c.problems, "\n"))
	}
}
