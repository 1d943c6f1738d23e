package history

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Load reads the history recorded in dir: every *.jsonl file in it (not
// in its subdirectories), one per Sink. Calls without a return line are
// ambiguous and not Returned. A last line without its newline, which a
// process killed in the middle of a write leaves, is ignored; anything
// else that is not a line of the format is an error. A file without a
// whole first line (its process was killed as it created it) holds no
// call, and is skipped.
func Load(dir string) (*History, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("history: no *.jsonl file in %s", dir)
	}
	slices.Sort(files)
	h := &History{Dir: dir}
	for _, path := range files {
		process, ops, err := loadFile(path)
		if err != nil {
			return nil, err
		}
		if process == "" {
			continue // killed before its first line was whole: no call recorded
		}
		h.Processes = append(h.Processes, process)
		h.Ops = append(h.Ops, ops...)
	}
	slices.SortStableFunc(h.Ops, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), strings.Compare(a.Process, b.Process), cmp.Compare(a.Seq, b.Seq))
	})
	return h, nil
}

// line is any line of a file, header or event.
type line struct {
	header
	Ev        string   `json:"ev"`
	Op        int64    `json:"op"`
	Client    string   `json:"client"`
	Method    Method   `json:"method"`
	Time      int64    `json:"time"`
	Args      *Args    `json:"args"`
	ArgsError string   `json:"args_error"`
	Outcome   Outcome  `json:"outcome"`
	Results   *Results `json:"results"`
	Error     *Error   `json:"error"`
}

func loadFile(path string) (string, []Op, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("history: %w", err)
	}
	bad := func(n int, format string, args ...any) error {
		return fmt.Errorf("history: %s:%d: %s", path, n, fmt.Sprintf(format, args...))
	}
	r := bufio.NewReader(bytes.NewReader(data))
	var (
		process string
		ops     []Op
		index   = map[int64]int{} // op number → index in ops
	)
	for n := 1; ; n++ {
		text, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a last line without its newline was cut short by a kill
		}
		var l line
		if err := json.Unmarshal(text, &l); err != nil {
			return "", nil, bad(n, "%v", err)
		}
		switch {
		case n == 1:
			if l.Format != Format {
				return "", nil, bad(n, "format %q; want %q", l.Format, Format)
			}
			process = l.Process
		case l.Format != "":
			return "", nil, bad(n, "a second header")
		case l.Ev == "call":
			if _, dup := index[l.Op]; dup {
				return "", nil, bad(n, "op %d called twice", l.Op)
			}
			op := Op{Process: process, Client: l.Client, Seq: l.Op, Method: l.Method, ArgsError: l.ArgsError,
				Call: l.Time, Outcome: Ambiguous}
			if l.Args != nil {
				op.Args = *l.Args
			}
			index[l.Op] = len(ops)
			ops = append(ops, op)
		case l.Ev == "return":
			i, ok := index[l.Op]
			switch {
			case !ok:
				return "", nil, bad(n, "return of op %d, which was not called", l.Op)
			case ops[i].Returned:
				return "", nil, bad(n, "op %d returned twice", l.Op)
			case l.Time < ops[i].Call:
				return "", nil, bad(n, "op %d returned before it was called", l.Op)
			}
			switch l.Outcome {
			case OK, Refused, Ambiguous:
			default:
				return "", nil, bad(n, "outcome %q", l.Outcome)
			}
			op := &ops[i]
			op.Returned, op.Return, op.Outcome, op.Error = true, l.Time, l.Outcome, l.Error
			if l.Results != nil {
				op.Results = *l.Results
			}
		default:
			return "", nil, bad(n, "neither a call nor a return")
		}
	}
	return process, ops, nil
}

// Runs returns the run directories under root, root included: those that
// hold at least one *.jsonl file, in lexical order.
func Runs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".jsonl") {
			dir := filepath.Dir(path)
			if len(dirs) == 0 || dirs[len(dirs)-1] != dir {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), nil
}
