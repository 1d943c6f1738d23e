package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
)

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
