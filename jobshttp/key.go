package jobshttp

import (
	"errors"
	"net/http"
	"strings"
)

// HeaderIdempotencyKey is the request header that carries the client's key.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxKeyBytes is the longest idempotency key accepted, in bytes, after
// unquoting.
const MaxKeyBytes = 255

var (
	errKeyMissing = errors.New("the request has no Idempotency-Key header")
	errKeyEmpty   = errors.New("the Idempotency-Key header is empty")
	errKeyTwice   = errors.New("the request has more than one Idempotency-Key header")
	errKeyLong    = errors.New("the Idempotency-Key is longer than 255 bytes")
	errKeyChars   = errors.New("the Idempotency-Key must be printable ASCII: a bare token without spaces, or a quoted string")
	errKeyQuotes  = errors.New(`the Idempotency-Key is not a well-formed quoted string (RFC 8941: "…" with only \" and \\ escaped)`)
)

// IdempotencyKey returns the idempotency key of r. The header may hold a
// structured-field string, as the IETF draft specifies (Idempotency-Key:
// "8e03978e-40d5-43e8-bc93-6894a57f9324"), or the same characters bare, as
// many clients send it (Idempotency-Key: 8e03978e-…); both name the same
// key. The key must be 1 to 255 bytes of printable ASCII (spaces only inside
// quotes), and the header must appear once.
func IdempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(HeaderIdempotencyKey)
	switch len(vs) {
	case 0:
		return "", errKeyMissing
	case 1:
	default:
		return "", errKeyTwice
	}
	return parseKey(vs[0])
}

func parseKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return "", errKeyEmpty
	}
	if v[0] != '"' {
		for i := 0; i < len(v); i++ {
			if v[i] <= ' ' || v[i] > '~' {
				return "", errKeyChars
			}
		}
		if len(v) > MaxKeyBytes {
			return "", errKeyLong
		}
		return v, nil
	}
	// sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errKeyQuotes
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errKeyQuotes
			}
			key := b.String()
			switch {
			case key == "":
				return "", errKeyEmpty
			case len(key) > MaxKeyBytes:
				return "", errKeyLong
			}
			return key, nil
		case c < ' ' || c > '~':
			return "", errKeyChars
		default:
			b.WriteByte(c)
		}
	}
	return "", errKeyQuotes // no closing quote
}
