package perf

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
)

// The requests and results of the benchmark are realistic in size and
// shape, and different for every key: about 1 KB of JSON for a request (an
// order with a customer, an address, line items and metadata), about 300
// bytes for a result. Each is written once, as a template with holes; Params
// and Result fill the holes in Go for the measured requests, and fillSQL
// fills them in SQL for the rows prefilled with set-based inserts, so that
// both look alike.
var (
	paramsTemplate = parseTemplate(`{"amount":{n},"currency":"eur","description":"Order {h} for customer {h}",` +
		`"customer":{"id":"cus_{h}","email":"{h}@example.com","name":"Customer {h}",` +
		`"address":{"line1":"{n} Harbour Road","line2":"Unit {n}","city":"Springfield","postal_code":"{n}","country":"DE"}},` +
		`"items":[{"sku":"sku_{h}","name":"Item {h}","quantity":{n},"unit_amount":{n}},` +
		`{"sku":"sku_{h}","name":"Item {h}","quantity":{n},"unit_amount":{n}},` +
		`{"sku":"sku_{h}","name":"Item {h}","quantity":{n},"unit_amount":{n}}],` +
		`"metadata":{"order_id":"ord_{h}","session":"{h}","campaign":"{h}","note":"{h}{h}"},` +
		`"capture":true,"statement_descriptor":"JOBS {n}"}`)
	resultTemplate = parseTemplate(`{"charge":"ch_{h}","status":"succeeded","amount_captured":{n},` +
		`"balance_transaction":"txn_{h}","receipt_url":"https://example.com/receipts/{h}",` +
		`"payment_method":{"type":"card","last4":"{n}","fingerprint":"{h}"}}`)
)

// The request sizes of the Submit workloads, in bytes, roughly.
const (
	Size100B = 100
	Size1KB  = 1000
	Size10KB = 10_000
)

// The requests of about 100 bytes (an amount and two references) and about
// 10 KB (the order of paramsTemplate with 70 line items).
var (
	smallParamsTemplate = parseTemplate(`{"amount":{n},"currency":"eur","customer":"cus_{h}","order":"ord_{h}"}`)
	largeParamsTemplate = parseTemplate(`{"amount":{n},"currency":"eur","description":"Order {h} for customer {h}",` +
		`"customer":{"id":"cus_{h}","email":"{h}@example.com","name":"Customer {h}",` +
		`"address":{"line1":"{n} Harbour Road","line2":"Unit {n}","city":"Springfield","postal_code":"{n}","country":"DE"}},` +
		`"items":[` + strings.Repeat(`{"sku":"sku_{h}","name":"Item {h}","quantity":{n},"unit_amount":{n}},`, 69) +
		`{"sku":"sku_{h}","name":"Item {h}","quantity":{n},"unit_amount":{n}}],` +
		`"metadata":{"order_id":"ord_{h}","session":"{h}","campaign":"{h}","note":"{h}{h}"},` +
		`"capture":true,"statement_descriptor":"JOBS {n}"}`)
)

// ParamsFor returns the request parameters of the benchmark intent submitted
// under key, about 1 KB: the same for the same key, different for another.
func ParamsFor(key string) json.RawMessage { return paramsTemplate.fill(key) }

// SizedParamsFor is ParamsFor for a request of about size bytes: Size100B,
// Size1KB or Size10KB (0 is Size1KB).
func SizedParamsFor(size int, key string) json.RawMessage {
	switch size {
	case Size100B:
		return smallParamsTemplate.fill(key)
	case Size10KB:
		return largeParamsTemplate.fill(key)
	}
	return paramsTemplate.fill(key)
}

// ResultFor returns the result that the attempt with this ID offers when it
// completes: different for every attempt, so that a check can tell whose
// result a job kept.
func ResultFor(attemptID string) json.RawMessage { return resultTemplate.fill(attemptID) }

// A hole in a template.
type hole int

const (
	noHole  hole = iota
	hexHole      // {h}: 32 hexadecimal digits
	numHole      // {n}: an integer from 0 to 99,999
)

type part struct {
	text string // literal JSON before the hole
	hole hole
}

type template []part

func parseTemplate(s string) template {
	var t template
	for s != "" {
		i, h := strings.Index(s, "{h}"), hexHole
		if n := strings.Index(s, "{n}"); n >= 0 && (i < 0 || n < i) {
			i, h = n, numHole
		}
		if i < 0 {
			return append(t, part{text: s})
		}
		t = append(t, part{text: s[:i], hole: h})
		s = s[i+len("{h}"):]
	}
	return t
}

// fill fills the holes from a generator seeded with seed.
func (t template) fill(seed string) json.RawMessage {
	f := fnv.New64a()
	f.Write([]byte(seed))
	rng := rand.New(rand.NewPCG(f.Sum64(), 0x6a6f6273))
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 1152*len(t)/len(paramsTemplate))
	for _, p := range t {
		b = append(b, p.text...)
		switch p.hole {
		case hexHole:
			for range 2 {
				v := rng.Uint64()
				for range 16 {
					b = append(b, digits[v&15])
					v >>= 4
				}
			}
		case numHole:
			b = strconv.AppendInt(b, rng.Int64N(100_000), 10)
		}
	}
	return b
}

// sql returns an SQL expression that fills the template's holes with fresh
// random values for every row.
func (t template) sql(dialect string) string {
	hex, num := `md5(random()::text)`, `floor(random() * 100000)::int`
	if dialect == SQLite {
		hex, num = `lower(hex(randomblob(16)))`, `abs(random() % 100000)`
	}
	var terms []string
	for _, p := range t {
		if p.text != "" {
			terms = append(terms, `'`+strings.ReplaceAll(p.text, `'`, `''`)+`'`)
		}
		switch p.hole {
		case hexHole:
			terms = append(terms, hex)
		case numHole:
			terms = append(terms, num)
		}
	}
	return strings.Join(terms, " || ")
}
