package jobs

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// ID prefixes make job and attempt IDs recognisable in logs.
const (
	jobPrefix     = "job_"
	attemptPrefix = "att_"
)

// crockford is Crockford's base32 alphabet: no I, L, O or U, and it sorts in
// the same order as the values it encodes.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newID returns prefix followed by 26 characters of base32: 48 bits of
// milliseconds since the Unix epoch, then 80 bits from crypto/rand. IDs sort
// by creation time (to the millisecond) and cannot be guessed.
func newID(prefix string, t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	rand.Read(b[6:]) // never returns an error; crashes the program if the OS cannot supply randomness
	out := make([]byte, len(prefix)+26)
	copy(out, prefix)
	enc := out[len(prefix):]
	// 128 bits as 26 base32 digits: the first digit holds the top 3 bits.
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	for i := 25; i >= 0; i-- {
		enc[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}
