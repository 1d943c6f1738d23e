package jobs

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

const (
	maxNameBytes = 255  // owner, key, kind, provider, IDs
	maxTextBytes = 4096 // reasons and provider references
)

// checkName validates an owner, key, kind or provider: 1 to 255 bytes of
// valid UTF-8 without NUL.
func checkName(field, s string) error {
	if s == "" {
		return invalid(field, "empty")
	}
	if len(s) > maxNameBytes {
		return invalid(field, "longer than %d bytes", maxNameBytes)
	}
	return checkChars(field, s)
}

// checkText validates a free-text field such as a reason: up to 4096 bytes
// of valid UTF-8 without NUL; it may be empty.
func checkText(field, s string) error {
	if len(s) > maxTextBytes {
		return invalid(field, "longer than %d bytes", maxTextBytes)
	}
	return checkChars(field, s)
}

func checkChars(field, s string) error {
	if !utf8.ValidString(s) {
		return invalid(field, "not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "contains a NUL byte")
	}
	return nil
}

// validateSubmit checks every field of req and returns its params in
// canonical form.
func (m *Manager) validateSubmit(req SubmitRequest) (json.RawMessage, error) {
	for _, f := range [...]struct{ name, value string }{
		{"Owner", req.Owner}, {"Key", req.Key}, {"Kind", req.Kind}, {"Provider", req.Provider},
	} {
		if err := checkName(f.name, f.value); err != nil {
			return nil, err
		}
	}
	if !req.Reuse.Valid() {
		return nil, invalid("Reuse", "unknown policy %d", uint8(req.Reuse))
	}
	if len(req.Params) == 0 {
		return nil, invalid("Params", "empty; use {} or null for none")
	}
	if len(req.Params) > m.opts.MaxParamsBytes {
		return nil, invalid("Params", "%d bytes, over the limit of %d", len(req.Params), m.opts.MaxParamsBytes)
	}
	canon, err := Canonicalize(req.Params)
	if err != nil {
		return nil, invalid("Params", "%v", err)
	}
	return canon, nil
}

// checkResult validates a result passed to Complete, or produced by a
// provider, by the rules of params (see Canonicalize): one JSON value in
// valid UTF-8, with no lone UTF-16 surrogate, no duplicate object key and no
// nesting deeper than 128, within MaxResultBytes. Both databases can then
// store it as it is: PostgreSQL refuses invalid UTF-8 and NUL, SQLite's
// json_valid refuses deep nesting. The result is stored as given, not in
// canonical form: its key order and spacing are the provider's.
func (m *Manager) checkResult(result json.RawMessage) error {
	if len(result) == 0 {
		return invalid("Result", "empty; use null for no value")
	}
	if len(result) > m.opts.MaxResultBytes {
		return invalid("Result", "%d bytes, over the limit of %d", len(result), m.opts.MaxResultBytes)
	}
	if err := checkJSON(result); err != nil {
		return invalid("Result", "%v", err)
	}
	return nil
}
