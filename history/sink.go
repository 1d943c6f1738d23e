package history

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// Format is the value of the "format" member of a file's first line.
const Format = "jobs-history/1"

// Sink writes the calls of one process to a file of its own in a run's
// directory (see the package documentation for the format). It is safe
// for concurrent use by any number of recorded stores; each line is
// written with one write(2), so that a process killed at any moment
// leaves whole lines behind.
type Sink struct {
	path    string
	process string
	next    atomic.Int64 // the last op number handed out

	mu     sync.Mutex
	f      *os.File
	err    error // the first write error, returned by Close
	closed bool
}

// header is a file's first line.
type header struct {
	Format  string `json:"format"`
	Process string `json:"process"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Started int64  `json:"started"`
}

// callLine is written before the store is called.
type callLine struct {
	Ev        string `json:"ev"` // "call"
	Op        int64  `json:"op"`
	Client    string `json:"client"`
	Method    Method `json:"method"`
	Time      int64  `json:"time"`
	Args      *Args  `json:"args,omitempty"`
	ArgsError string `json:"args_error,omitempty"`
}

// returnLine is written once the store answered.
type returnLine struct {
	Ev      string   `json:"ev"` // "return"
	Op      int64    `json:"op"`
	Time    int64    `json:"time"`
	Outcome Outcome  `json:"outcome"`
	Results *Results `json:"results,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// NewSink creates dir if it does not exist, and a new file in it for this
// process's calls, named after the host, the PID and a random nonce.
// Several Sinks, in one process or many, may write into one directory.
func NewSink(dir string) (*Sink, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	host = sanitize(host)
	var nonce [4]byte
	rand.Read(nonce[:])
	process := fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(nonce[:]))
	path := filepath.Join(dir, process+".jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	s := &Sink{path: path, process: process, f: f}
	s.write(header{Format: Format, Process: process, Host: host, PID: os.Getpid(), Started: time.Now().UnixNano()})
	if s.err != nil {
		f.Close()
		return nil, s.err
	}
	return s, nil
}

// Path returns the file the Sink writes.
func (s *Sink) Path() string { return s.path }

// Process returns the name of the Sink's process, as its operations
// record it.
func (s *Sink) Process() string { return s.process }

// Close closes the file, and returns the first error that writing to it
// met, if any: a history with lines missing would be judged wrongly, so a
// test fails when Close fails. Calls recorded after Close are lost, and
// make Close's error (if Close is called again) say so.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		if err := s.f.Close(); err != nil && s.err == nil {
			s.err = fmt.Errorf("history: %w", err)
		}
	}
	return s.err
}

// call records the call of an operation and returns its number.
func (s *Sink) call(client string, m Method, at int64, args *Args) int64 {
	op := s.next.Add(1)
	line := callLine{Ev: "call", Op: op, Client: client, Method: m, Time: at, Args: args}
	b, err := json.Marshal(line)
	if err != nil {
		// A json.RawMessage that is not JSON: the call is recorded
		// without its arguments.
		line.Args, line.ArgsError = nil, err.Error()
		b, err = json.Marshal(line)
	}
	s.writeLine(b, err)
	return op
}

// ret records the answer to the operation op.
func (s *Sink) ret(op int64, at int64, res *Results, err error) {
	line := returnLine{Ev: "return", Op: op, Time: at, Outcome: Classify(err), Results: res, Error: errorOf(err)}
	b, merr := json.Marshal(line)
	if merr != nil {
		line.Results = nil
		if line.Error == nil {
			line.Error = &Error{}
		}
		line.Error.Message += " (results not recorded: " + merr.Error() + ")"
		b, merr = json.Marshal(line)
	}
	s.writeLine(b, merr)
}

// write appends v as one line.
func (s *Sink) write(v any) {
	b, err := json.Marshal(v)
	s.writeLine(b, err)
}

// writeLine appends b, the encoding of a line or the error that encoding
// met, as one line, in one write.
func (s *Sink) writeLine(b []byte, encodeErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case encodeErr != nil:
		if s.err == nil {
			s.err = fmt.Errorf("history: encode: %w", encodeErr)
		}
		return
	case s.closed:
		if s.err == nil {
			s.err = errors.New("history: a call was recorded after the Sink was closed")
		}
		return
	}
	if _, err := s.f.Write(append(b, '\n')); err != nil && s.err == nil {
		s.err = fmt.Errorf("history: %w", err)
	}
}

// RunDir returns a new directory for one run's history under root, named
// after name (a test's name, say: characters other than letters, digits,
// '-', '_' and '.' become '_') and the time, and creates it. Give its
// path to every process of the run.
func RunDir(root, name string) (string, error) {
	dir := filepath.Join(root, sanitize(name)+"-"+time.Now().UTC().Format("20060102T150405.000000000"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("history: %w", err)
	}
	return dir, nil
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '_'
	}, name)
}
