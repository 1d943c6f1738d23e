package jobs

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonCheckSeeds are inputs at the edges of the canonical parser's rules.
var jsonCheckSeeds = []string{
	``, ` `, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `1e400`, `01`, `-`, `1.`, `1e`, `NaN`,
	`{"b":1,"a":[true,null,"x"]}`, `{"a":{"a":{"a":1}},"b":{"a":2}}`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"x":1,"x":2}}`, `[{"x":1},{"x":1}]`, `{"a":{"b":1},"b":1}`,
	`"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"a\u0000b"`, `"\x"`, `"\u12"`,
	"\"\xff\"", "\"a\x00b\"", "{}\x00", "\"\xed\xa0\x80\"", "\"a\tb\"", `"abc`, `[1,2`, `[1,2,]`, `{a:1}`, `{} []`,
	strings.Repeat("[", 128) + "1" + strings.Repeat("]", 128),
	strings.Repeat("[", 129) + "1" + strings.Repeat("]", 129),
	strings.Repeat(`{"a":`, 129) + "1" + strings.Repeat("}", 129),
	`{"` + strings.Repeat("k", 5000) + `":1,"` + strings.Repeat("k", 5000) + `":2}`,
}

// checkJSON, which Complete uses for results, accepts exactly what
// Canonicalize, which Submit uses for params, accepts.
func TestCheckJSONAgreesWithCanonicalize(t *testing.T) {
	t.Parallel()
	inputs := append([]string(nil), jsonCheckSeeds...)
	golden, err := filepath.Glob("testdata/canonical/*.json")
	if err != nil || len(golden) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, name := range golden {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		agree(t, []byte(in))
	}
}

func FuzzCheckJSON(f *testing.F) {
	for _, s := range jsonCheckSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(agree)
}

func agree(t *testing.T, in []byte) {
	_, canonErr := Canonicalize(in)
	checkErr := checkJSON(in)
	if (canonErr == nil) != (checkErr == nil) {
		t.Fatalf("%.80q: Canonicalize says %v, checkJSON says %v", in, canonErr, checkErr)
	}
	if checkErr != nil && len(checkErr.Error()) > 200 {
		t.Errorf("%.80q: a %d-byte problem; it must fit in a reason", in, len(checkErr.Error()))
	}
}

// TestSpecialWordFindsEveryByteThatIsNotPlainASCII checks the string scan's
// eight-byte test against the byte table, for every byte value at every
// place in a word of plain bytes.
func TestSpecialWordFindsEveryByteThatIsNotPlainASCII(t *testing.T) {
	t.Parallel()
	for c := range 256 {
		want := !plainByte[c] || c >= utf8.RuneSelf
		for i := range 8 {
			w := []byte("abcdefgh")
			w[i] = byte(c)
			if got := specialWord(binary.LittleEndian.Uint64(w)); got != want {
				t.Errorf("byte %#x at %d: specialWord = %v, want %v", c, i, got, want)
			}
		}
	}
	if specialWord(binary.LittleEndian.Uint64([]byte("plain te"))) {
		t.Error("plain ASCII reported special")
	}
}

// TestLongStringsReadAsEncodingJSONReadsThem puts each kind of byte that
// ends the string scan's eight-byte path at every place of a long string,
// and wants Canonicalize to accept what encoding/json accepts (it refuses
// more: invalid UTF-8, which encoding/json replaces) and to keep the value.
func TestLongStringsReadAsEncodingJSONReadsThem(t *testing.T) {
	t.Parallel()
	for _, special := range []string{"é", "😀", "\xff", "\xed\xa0\x80", "\x01", "\t", `\n`, `\"`, `\\`, `\u00e9`, `"`} {
		for i := range 20 {
			in := []byte(`"` + strings.Repeat("a", i) + special + strings.Repeat("b", 20-i) + `"`)
			canon, err := Canonicalize(in)
			if want := json.Valid(in) && utf8.Valid(in); (err == nil) != want {
				t.Fatalf("%q: Canonicalize error %v, want valid = %v", in, err, want)
			}
			if err != nil {
				continue
			}
			var a, b string
			if json.Unmarshal(in, &a) != nil || json.Unmarshal(canon, &b) != nil || a != b {
				t.Errorf("%q: canonical form %q reads %q, want %q", in, canon, b, a)
			}
		}
	}
}
