package jobshttp

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestProblemCodesAreDocumented: every problem code the handler can emit
// (every Problem* constant) has a section in README.md under its own
// heading, whose anchor is the code, so that the type URIs built from
// DefaultProblemBase resolve; and the section states the code's status and
// title. Sections without a code fail too, so the document cannot rot.
func TestProblemCodesAreDocumented(t *testing.T) {
	t.Parallel()
	if !strings.HasSuffix(DefaultProblemBase, "/jobshttp/README.md#") {
		t.Fatalf("DefaultProblemBase %q does not point into jobshttp/README.md, the document checked here", DefaultProblemBase)
	}
	codes := problemConstants(t)
	if len(codes) == 0 {
		t.Fatal("no Problem* constants found")
	}
	sections := readmeSections(t, "README.md", "## Problem types")
	for name, code := range codes {
		pt, ok := problemTypes[code]
		if !ok {
			t.Errorf("%s = %q has no entry in problemTypes", name, code)
			continue
		}
		text, ok := sections[code]
		if !ok {
			t.Errorf("README.md has no heading whose anchor is #%s (%s)", code, name)
			continue
		}
		if want := fmt.Sprintf("**Status:** %d", pt.status); !strings.Contains(text, want) {
			t.Errorf("README.md #%s does not say %s", code, want)
		}
		if want := "**Title:** " + pt.title; !strings.Contains(text, want) {
			t.Errorf("README.md #%s does not say %s", code, want)
		}
	}
	documented := map[string]bool{}
	for _, code := range codes {
		documented[code] = true
	}
	for anchor := range sections {
		if !documented[anchor] {
			t.Errorf("README.md documents #%s, which is no Problem* constant", anchor)
		}
	}
	for code := range problemTypes {
		if !documented[code] {
			t.Errorf("problemTypes has %q, which is no Problem* constant", code)
		}
	}
}

// problemConstants returns the string constants named Problem* declared in
// the package's own (non-test) files, by name.
func problemConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Problem") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", fset.Position(id.Pos()), id.Name)
						continue
					}
					out[id.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return out
}

// readmeSections returns the text under each heading below the heading
// under, by the heading's anchor as GitHub renders it.
func readmeSections(t *testing.T, path, under string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	level := strings.Count(strings.Fields(under)[0], "#")
	sections := map[string]string{}
	in, current := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if hashes > 0 && strings.HasPrefix(line[hashes:], " ") {
			switch {
			case line == under:
				in, current = true, ""
				continue
			case hashes <= level:
				in, current = false, ""
			case in:
				current = githubAnchor(line[hashes+1:])
				if _, dup := sections[current]; dup {
					t.Errorf("%s: two headings with the anchor #%s", path, current)
				}
				sections[current] = ""
				continue
			}
		}
		if in && current != "" {
			sections[current] += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in && len(sections) == 0 {
		t.Fatalf("%s has no section %q", path, under)
	}
	return sections
}

// githubAnchor is the fragment GitHub gives a Markdown heading: lower case,
// spaces as hyphens, other punctuation than - and _ dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubAnchor(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"idempotency-key-missing": "idempotency-key-missing",
		"`body-too-large`":        "body-too-large",
		"Problem types":           "problem-types",
		" Not Found (404) ":       "not-found-404",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("githubAnchor(%q) = %q; want %q", heading, got, want)
		}
	}
}
