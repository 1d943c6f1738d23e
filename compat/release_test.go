package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// TestModulesBuildAgainstTheReleasedRoot builds what users of a release
// build, outside this repository's workspace (GOWORK=off, no replace
// directive): a module of its own that requires the root module, and the
// otel module as published. The root module is served at the version the
// modules require by a file-system GOPROXY made from this checkout, in the
// layout of the module proxy protocol, as if that version were tagged;
// every other module comes from the local module cache, so that the test
// needs no network. It proves that each go.mod holds real requirements
// and that the root module's zip (what a tag publishes) builds.
func TestModulesBuildAgainstTheReleasedRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules from scratch")
	}
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	version := requiredRootVersion(t, filepath.Join(root, "otel", "go.mod"))
	proxy := rootModuleProxy(t, root, version)

	consumer := t.TempDir()
	writeFile(t, filepath.Join(consumer, "go.mod"), "module example.com/consumer\n\ngo 1.26\n\nrequire "+rootPath+" "+version+"\n")
	writeFile(t, filepath.Join(consumer, "main.go"), `package main

import (
	"fmt"

	"github.com/intentjobs/jobs"
)

func main() {
	ms, err := jobs.MigrationList(jobs.Postgres)
	fmt.Println(jobs.SchemaVersion(), len(ms), err)
}
`)
	otel := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum", "otel.go"} {
		b, err := os.ReadFile(filepath.Join(root, "otel", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(otel, name), string(b))
	}

	// Every other module comes from this machine's module cache, as the
	// module proxy would serve it: fetched there first, as a user's go
	// would fetch it, in case nothing here has built the otel module yet.
	downloadRequirements(t, filepath.Join(root, "go.mod"), filepath.Join(root, "otel", "go.mod"))

	modcache := t.TempDir() // the user's, empty: nothing of this checkout in it
	env := append(os.Environ(),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod -modcacherw -buildvcs=false",
		"GOMODCACHE="+modcache,
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download"),
		"GONOSUMDB="+rootPath, // the version is not published, so no checksum database knows it
		"GOSUMDB=off",
		"CGO_ENABLED=0",
	)
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	// What a user does: ask for the release (go get), then build. Not go
	// mod tidy, which also resolves the tests of every dependency, modules
	// that a module cache holds only if something once tested them.
	run(consumer, "get", rootPath+"@"+version)
	// SchemaVersion is the newest dialect's; MigrationList(jobs.Postgres)
	// lists PostgreSQL's files.
	pg, _ := filepath.Glob(filepath.Join(root, "migrations", "postgres", "*.sql"))
	lite, _ := filepath.Glob(filepath.Join(root, "migrations", "sqlite", "*.sql"))
	want := fmt.Sprintf("%d %d <nil>\n", max(len(pg), len(lite)), len(pg))
	if out := run(consumer, "run", "."); !strings.HasSuffix(out, want) {
		t.Errorf("consumer printed %q, want %q", out, want)
	}
	run(otel, "build", "./...")
}

const rootPath = "github.com/intentjobs/jobs"

// downloadRequirements fetches into this machine's module cache every
// module the go.mod files at paths require, but the root module.
func downloadRequirements(t *testing.T, paths ...string) {
	t.Helper()
	args := []string{"mod", "download"}
	for _, path := range paths {
		for _, r := range readModFile(t, path).Require {
			if r.Mod.Path != rootPath {
				args = append(args, r.Mod.Path+"@"+r.Mod.Version)
			}
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = t.TempDir() // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// readModFile parses the go.mod file at path.
func readModFile(t *testing.T, path string) *modfile.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// requiredRootVersion reads the version of the root module that the
// go.mod at path requires.
func requiredRootVersion(t *testing.T, path string) string {
	t.Helper()
	f := readModFile(t, path)
	for _, r := range f.Require {
		if r.Mod.Path == rootPath {
			for _, rep := range f.Replace {
				if rep.Old.Path == rootPath {
					t.Fatalf("%s replaces %s: users never see that", path, rootPath)
				}
			}
			return r.Mod.Version
		}
	}
	t.Fatalf("%s does not require %s", path, rootPath)
	return ""
}

// rootModuleProxy lays out the root module at dir as version in a new
// directory that GOPROXY=file://… can serve, and returns that directory.
func rootModuleProxy(t *testing.T, dir, version string) string {
	t.Helper()
	proxy := t.TempDir()
	at := filepath.Join(proxy, rootPath, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	writeFile(t, filepath.Join(at, "list"), version+"\n")
	writeFile(t, filepath.Join(at, version+".info"), string(info))
	writeFile(t, filepath.Join(at, version+".mod"), string(gomod))
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	// The zip leaves out the nested modules (otel, bench, …), as a tag's does.
	if err := zip.CreateFromDir(z, module.Version{Path: rootPath, Version: version}, dir); err != nil {
		t.Fatalf("zip of the root module: %v", err)
	}
	return proxy
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
