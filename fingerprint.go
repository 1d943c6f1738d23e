package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting so that hostile input cannot exhaust the
// stack: at most this many objects and arrays inside one another.
const maxJSONDepth = 128

// Fingerprint returns the hex SHA-256 of an intent: kind, provider and params
// in canonical form (see Canonicalize). The owner is not part of it: the
// owner and key select the job, the fingerprint says what it asks for.
func Fingerprint(kind, provider string, canonicalParams []byte) string {
	const tag = "jobs.fingerprint.v1"
	// Each part preceded by its length, written to the hash in turn.
	h := sha256.New()
	var n [8]byte
	for _, part := range [...][]byte{[]byte(tag), []byte(kind), []byte(provider), canonicalParams} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var sum [sha256.Size]byte
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], h.Sum(sum[:0]))
	return string(out[:])
}

// maxIntentFields bounds SubmitRequest.IntentFields.
const maxIntentFields = 64

// fingerprintOf returns the fingerprint of req's intent, its params being
// canon in canonical form: of kind, provider and all of the params, or,
// with IntentFields, of kind, provider, the field names and those members
// of the params object only.
func fingerprintOf(req SubmitRequest, canon []byte) (string, error) {
	if len(req.IntentFields) == 0 {
		return Fingerprint(req.Kind, req.Provider, canon), nil
	}
	if len(req.IntentFields) > maxIntentFields {
		return "", invalid("IntentFields", "%d names, over the limit of %d", len(req.IntentFields), maxIntentFields)
	}
	for _, f := range req.IntentFields {
		if err := checkName("IntentFields", f); err != nil {
			return "", err
		}
	}
	var members map[string]json.RawMessage
	if canon[0] != '{' || json.Unmarshal(canon, &members) != nil {
		return "", invalid("IntentFields", "given, but Params is not a JSON object")
	}
	fields := slices.Clone(req.IntentFields)
	slices.Sort(fields)
	fields = slices.Compact(fields)

	// The chosen members as an object of their own, made canonical again:
	// canon's values are canonical already, and Canonicalize orders the
	// keys as it does everywhere.
	var sub bytes.Buffer
	sub.WriteByte('{')
	for _, f := range fields {
		v, ok := members[f]
		if !ok {
			continue // absent: the field list, hashed too, tells absent from null
		}
		if sub.Len() > 1 {
			sub.WriteByte(',')
		}
		name, _ := json.Marshal(f) // a valid UTF-8 string always encodes
		sub.Write(name)
		sub.WriteByte(':')
		sub.Write(v)
	}
	sub.WriteByte('}')
	subset, err := Canonicalize(sub.Bytes())
	if err != nil {
		return "", invalid("IntentFields", "%v", err)
	}

	h := sha256.New()
	var n [8]byte
	write := func(part []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	write([]byte("jobs.fingerprint.v1.fields"))
	write([]byte(req.Kind))
	write([]byte(req.Provider))
	binary.BigEndian.PutUint64(n[:], uint64(len(fields)))
	h.Write(n[:])
	for _, f := range fields {
		write([]byte(f))
	}
	write(subset)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Canonicalize returns the canonical form of a JSON value: no insignificant
// whitespace, object members sorted by key (bytewise, on the UTF-8 form),
// strings with escapes resolved and re-escaped minimally. Numbers keep their
// literal text, so 1 and 1.0 are different values. Two documents that differ
// only in key order or whitespace have the same canonical form; any change of
// a value changes it.
//
// It rejects invalid JSON, invalid UTF-8, duplicate object keys (whose
// meaning differs between parsers), trailing data and nesting deeper than 128.
func Canonicalize(data []byte) ([]byte, error) {
	w := canonWork.Get().(*canonBuffers)
	p := canonParser{in: data, members: w.members[:0], scratch: w.scratch[:0]}
	out, err := p.parse(make([]byte, 0, len(data)))
	w.members, w.scratch = p.members, p.scratch
	w.release(p.used)
	return out, err
}

// canonBuffers are the parser's working memory, kept from one call to the
// next: without them each call grows its stack of members and its scratch
// copy from nothing, which is most of what a call would allocate.
type canonBuffers struct {
	members []member
	keys    [][]byte // checkJSON's
	scratch []byte
}

var canonWork = sync.Pool{New: func() any { return new(canonBuffers) }}

// release returns the buffers to the pool, without the input's keys, which
// they must not keep alive, and without a scratch buffer grown past 64 KB
// by one large request. The parser used at most the first used entries of
// its members or keys (canonParser.used), and those alone are cleared: the
// rest are clear already, by the release of whichever call used them. (Each
// entry holds a pointer, and clearing one costs a write barrier while the
// garbage collector marks.)
func (w *canonBuffers) release(used int) {
	clear(w.members[:min(used, cap(w.members))])
	clear(w.keys[:min(used, cap(w.keys))])
	if cap(w.scratch) > 64<<10 {
		w.scratch = nil
	}
	canonWork.Put(w)
}

// checkJSON checks data by the rules of Canonicalize, without building the
// canonical form: it accepts exactly what Canonicalize accepts, at the cost
// of a scan and without an allocation per value.
func checkJSON(data []byte) error {
	w := canonWork.Get().(*canonBuffers)
	p := canonParser{in: data, check: true, keys: w.keys[:0]}
	_, err := p.parse(nil)
	w.keys = p.keys
	w.release(p.used)
	return err
}

// canonParser reads one JSON value. It writes the value's canonical form,
// or with check set only checks it and writes nothing.
type canonParser struct {
	in      []byte
	pos     int
	check   bool
	keys    [][]byte // with check: the keys of the objects being read, innermost last
	members []member // without: the members of the objects being read, innermost last
	scratch []byte   // a copy of an object's members while they are put in order
	used    int      // the most entries of keys or members in use at once
}

// parse reads the whole input as one value and appends its canonical form
// to out.
func (p *canonParser) parse(out []byte) ([]byte, error) {
	p.skipSpace()
	out, err := p.value(out, 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("unexpected data after the value")
	}
	return out, nil
}

// put appends s to out unless the parser only checks.
func (p *canonParser) put(out []byte, s string) []byte {
	if p.check {
		return out
	}
	return append(out, s...)
}

func (p *canonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *canonParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value reads one value at depth, the number of objects and arrays around
// it: an object or array at depth maxJSONDepth would be one level too many.
func (p *canonParser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case (c == '{' || c == '[') && depth >= maxJSONDepth:
		return nil, p.errorf("nested deeper than %d", maxJSONDepth)
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		s, escaped, err := p.str()
		if err != nil {
			return nil, err
		}
		if p.check {
			return out, nil
		}
		return appendStr(out, s, escaped), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	case p.literal("true"):
		return p.put(out, "true"), nil
	case p.literal("false"):
		return p.put(out, "false"), nil
	case p.literal("null"):
		return p.put(out, "null"), nil
	}
	return nil, p.errorf("unexpected character %q", p.in[p.pos])
}

func (p *canonParser) literal(word string) bool {
	if bytes.HasPrefix(p.in[p.pos:], []byte(word)) {
		p.pos += len(word)
		return true
	}
	return false
}

// member is an object's member as written to the output: its key
// (decoded) and where its "key":value text starts and ends.
type member struct {
	key        []byte
	start, end int
}

// object writes the members in the order read, then, if they are not in
// order, puts them in order in place: the canonical form takes one buffer
// however deep the nesting.
func (p *canonParser) object(out []byte, depth int) ([]byte, error) {
	p.pos++ // {
	if p.check {
		return p.checkObject(out, depth)
	}
	open := len(out)
	base := len(p.members)
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, "{}"...), nil
	}
	out = append(out, '{')
	for {
		key, escaped, err := p.memberKey()
		if err != nil {
			return nil, err
		}
		if len(p.members) > base {
			out = append(out, ',')
		}
		start := len(out)
		out = appendStr(out, key, escaped)
		out = append(out, ':')
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		p.members = append(p.members, member{key, start, len(out)})
		p.used = max(p.used, len(p.members))
		more, err := p.memberEnd()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	ms := p.members[base:]
	defer func() { p.members = p.members[:base] }()
	sorted := true // and no key twice
	for i := 1; i < len(ms) && sorted; i++ {
		sorted = bytes.Compare(ms[i-1].key, ms[i].key) < 0
	}
	if sorted {
		return append(out, '}'), nil
	}
	// The members' order, sorted as indexes rather than by moving the
	// members, whose keys are pointers: moving them costs a write barrier
	// each while the garbage collector marks.
	var small [32]int32
	order := small[:0]
	if len(ms) > len(small) {
		order = make([]int32, 0, len(ms))
	}
	for i := range ms {
		order = append(order, int32(i))
	}
	if len(order) <= len(small) {
		for i := 1; i < len(order); i++ { // an insertion sort: stable, and quick for a few members
			for k := i; k > 0 && bytes.Compare(ms[order[k-1]].key, ms[order[k]].key) > 0; k-- {
				order[k-1], order[k] = order[k], order[k-1]
			}
		}
	} else {
		slices.SortStableFunc(order, func(a, b int32) int { return bytes.Compare(ms[a].key, ms[b].key) })
	}
	for i := 1; i < len(order); i++ {
		if bytes.Equal(ms[order[i-1]].key, ms[order[i]].key) {
			return nil, duplicateKey(string(ms[order[i]].key))
		}
	}
	body := open + 1
	p.scratch = append(p.scratch[:0], out[body:]...)
	out = out[:body]
	for i, k := range order {
		if i > 0 {
			out = append(out, ',')
		}
		m := ms[k]
		out = append(out, p.scratch[m.start-body:m.end-body]...)
	}
	return append(out, '}'), nil
}

// memberKey reads an object member's key and the ':' after it, with the
// spaces around them.
func (p *canonParser) memberKey() (key []byte, escaped bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.in) || p.in[p.pos] != '"' {
		return nil, false, p.errorf("expected an object key")
	}
	if key, escaped, err = p.str(); err != nil {
		return nil, false, err
	}
	p.skipSpace()
	if p.pos >= len(p.in) || p.in[p.pos] != ':' {
		return nil, false, p.errorf("expected ':' after an object key")
	}
	p.pos++
	p.skipSpace()
	return key, escaped, nil
}

// memberEnd reads what follows an object member: ',' (more is true) or
// the '}' that ends the object.
func (p *canonParser) memberEnd() (more bool, err error) {
	p.skipSpace()
	switch {
	case p.pos >= len(p.in):
		return false, p.errorf("unexpected end of input in an object")
	case p.in[p.pos] == ',':
		p.pos++
		return true, nil
	case p.in[p.pos] == '}':
		p.pos++
		return false, nil
	}
	return false, p.errorf("expected ',' or '}' in an object")
}

// checkObject is object for a parser that only checks.
func (p *canonParser) checkObject(out []byte, depth int) ([]byte, error) {
	base := len(p.keys)
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return p.put(out, "{}"), nil
	}
	for {
		key, _, err := p.memberKey()
		if err != nil {
			return nil, err
		}
		if _, err := p.value(nil, depth+1); err != nil {
			return nil, err
		}
		p.keys = append(p.keys, key)
		p.used = max(p.used, len(p.keys))
		more, err := p.memberEnd()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	keys := p.keys[base:]
	slices.SortFunc(keys, bytes.Compare)
	for i := 1; i < len(keys); i++ {
		if bytes.Equal(keys[i-1], keys[i]) {
			return nil, duplicateKey(string(keys[i]))
		}
	}
	p.keys = p.keys[:base]
	return out, nil
}

func (p *canonParser) array(out []byte, depth int) ([]byte, error) {
	p.pos++ // [
	out = p.put(out, "[")
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return p.put(out, "]"), nil
	}
	for first := true; ; first = false {
		if !first {
			out = p.put(out, ",")
		}
		p.skipSpace()
		var err error
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return p.put(out, "]"), nil
		default:
			return nil, p.errorf("expected ',' or ']' in an array")
		}
	}
}

// number validates the JSON number grammar and copies the literal.
func (p *canonParser) number(out []byte) ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.in[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	if n := digits(); n == 0 || (n > 1 && p.in[intStart] == '0') {
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.check {
		return out, nil
	}
	return append(out, p.in[start:p.pos]...), nil
}

// str decodes a JSON string starting at the opening quote. Without escapes
// the result is a part of the input, not a copy, and escaped is false:
// it then holds nothing that a JSON string must escape.
func (p *canonParser) str() (s []byte, escaped bool, err error) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes. Eight bytes at a time while they are all
	// plain ASCII, then byte by byte, noting any byte that is not ASCII:
	// only a string that has one needs its UTF-8 checked.
	for p.pos+8 <= len(p.in) && !specialWord(binary.LittleEndian.Uint64(p.in[p.pos:])) {
		p.pos += 8
	}
	var high byte
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if plainByte[c] {
			high |= c
			p.pos++
			continue
		}
		if c == '"' {
			s := p.in[start:p.pos:p.pos]
			if high >= utf8.RuneSelf && !utf8.Valid(s) {
				return nil, false, p.errorf("string is not valid UTF-8")
			}
			p.pos++
			return s, false, nil
		}
		if c == '\\' {
			break
		}
		return nil, false, p.errorf("control character in a string")
	}
	buf := append([]byte(nil), p.in[start:p.pos]...)
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return nil, false, p.errorf("string is not valid UTF-8")
			}
			p.pos++
			return buf, true, nil
		case c < 0x20:
			return nil, false, p.errorf("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(p.in) {
			break
		}
		e := p.in[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false, p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.pos+1 < len(p.in) && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok = p.hex4(); !ok {
						return nil, false, p.errorf("invalid \\u escape")
					}
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, false, p.errorf("invalid UTF-16 surrogate pair")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, false, p.errorf("invalid escape \\%c", e)
		}
	}
	return nil, false, p.errorf("unterminated string")
}

// specialWord reports whether any of the eight bytes of w (a string's
// bytes, read little-endian) is not plain ASCII: a control character, '"',
// '\\' or a byte of 0x80 or above. It may report a plain byte that
// follows a special one as special too, which only ends the fast path a
// few bytes early.
func specialWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs } // bytes that are 0
	less := (w - ones*0x20) & ^w & highs                             // bytes below 0x20
	return (less|zero(w^(ones*'"'))|zero(w^(ones*'\\'))|w)&highs != 0
}

// plainByte tells the bytes that a JSON string holds as they are: not a
// control character, not '"', not '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendStr writes s, a string str read, as a JSON string: as it was read
// when it had no escapes (nothing in it needs one), else re-escaped.
func appendStr(out, s []byte, escaped bool) []byte {
	if escaped {
		return appendString(out, s)
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

func (p *canonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// appendString writes s as a JSON string, escaping only what JSON requires.
func appendString[S ~string | ~[]byte](out []byte, s S) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

// duplicateKey reports a key that appears twice in one object, quoting at
// most its first 64 bytes, so that the message stays short enough to be
// recorded as a reason whatever the key.
func duplicateKey(key string) error {
	const maxQuoted = 64
	if len(key) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(key[cut]) {
			cut--
		}
		key = key[:cut] + "…"
	}
	return errors.New("duplicate object key " + string(appendString(nil, key)))
}
