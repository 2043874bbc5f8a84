package testenv

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// minCredentialLength is the shortest value the scan looks for: shorter
// Secret values (ports, "true", short user names) would match unrelated log
// text, and every credential ml-platform generates is far longer.
const minCredentialLength = 8

// notCredentialKeys are Secret keys that by convention hold identifiers or
// public material, which logs may legitimately name.
var notCredentialKeys = map[string]bool{
	"username": true, "user": true, "host": true, "port": true, "database": true, "dbname": true,
	"sslmode": true, "ca.crt": true, "tls.crt": true,
}

// Credentials is a set of secret values, each with a description of where
// it came from that is safe to print (never the value itself).
type Credentials struct {
	mu     sync.Mutex
	owners map[string]string
}

// credentials collects every credential the test API servers of this
// process held (see Start) and those tests add with RecordCredential.
var credentials = &Credentials{}

// RecordCredential adds a value that must never appear in the operators'
// logs, for credentials that are not in a Secret of the test API server,
// such as a test database's admin password before it is stored.
func RecordCredential(value, owner string) {
	credentials.Add(value, owner)
}

// Add records value unless it is too short to scan for without false
// alarms; it reports whether it did.
func (c *Credentials) Add(value, owner string) bool {
	if len(value) < minCredentialLength {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil {
		c.owners = map[string]string{}
	}
	if _, ok := c.owners[value]; !ok {
		c.owners[value] = owner
	}
	return true
}

// Len is how many credentials were recorded.
func (c *Credentials) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.owners)
}

// Leak is a credential found in text: whose it is and in which form.
type Leak struct {
	Owner string
	Form  string
}

func (l Leak) String() string { return l.Owner + " (" + l.Form + ")" }

// Scan returns every recorded credential that text contains in any form a
// log could carry it: as is, JSON- or URL-escaped, base64 (standard or URL
// alphabet, alone or at any offset inside a longer base64 string), hex, or
// inside a hex dump such as the one client-go logs of a protobuf body.
func (c *Credentials) Scan(text string) []Leak {
	c.mu.Lock()
	m := newMatcher()
	for value, owner := range c.owners {
		for form, pattern := range credentialForms(value) {
			m.add(pattern, Leak{Owner: owner, Form: form})
		}
	}
	c.mu.Unlock()

	found := map[Leak]bool{}
	m.scan(text, "", found)
	for _, dump := range decodeHexDumps(text) {
		m.scan(dump, "in a hex dump", found)
	}
	leaks := make([]Leak, 0, len(found))
	for l := range found {
		leaks = append(leaks, l)
	}
	sort.Slice(leaks, func(i, j int) bool { return leaks[i].String() < leaks[j].String() })
	return leaks
}

// credentialForms maps a description of each encoded form of v to that form.
func credentialForms(v string) map[string]string {
	forms := map[string]string{"plain": v, "hex": hex.EncodeToString([]byte(v)), "HEX": strings.ToUpper(hex.EncodeToString([]byte(v)))}
	if quoted, err := json.Marshal(v); err == nil {
		forms["JSON-escaped"] = string(quoted[1 : len(quoted)-1])
	}
	forms["URL query-escaped"] = url.QueryEscape(v)
	forms["URL path-escaped"] = url.PathEscape(v)
	for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding} {
		for offset := range 3 {
			forms[fmt.Sprintf("%s at offset %d", name, offset)] = base64Fragment(enc, []byte(v), offset)
		}
	}
	return forms
}

// base64Fragment is the part of the base64 encoding of v that is the same
// wherever v starts, offset bytes after a 3-byte boundary, in a longer
// input: the characters encoding v's bits only.
func base64Fragment(enc *base64.Encoding, v []byte, offset int) string {
	padded := append(make([]byte, offset), v...)
	encoded := enc.EncodeToString(padded)
	first := (8*offset + 5) / 6       // the first character without bits of the prefix
	last := 8 * (offset + len(v)) / 6 // the characters before it hold only bits up to v's end
	return encoded[first:last]
}

// hexDumpLine is one line of encoding/hex's Dump: an offset, up to 16 bytes
// in hex and their printable characters between bars.
var hexDumpLine = regexp.MustCompile(`([0-9a-f]{8})  ((?:[0-9a-f]{2}  ?)+) *\|`)

// decodeHexDumps returns the bytes of every hex dump in text. Dumps inside
// JSON log lines have their line breaks escaped as \n.
func decodeHexDumps(text string) []string {
	text = strings.ReplaceAll(text, `\n`, "\n")
	var dumps []string
	var current []byte
	for _, m := range hexDumpLine.FindAllStringSubmatch(text, -1) {
		if m[1] == "00000000" && len(current) > 0 {
			dumps = append(dumps, string(current))
			current = nil
		}
		for _, field := range strings.Fields(m[2]) {
			b, err := hex.DecodeString(field)
			if err == nil {
				current = append(current, b...)
			}
		}
	}
	if len(current) > 0 {
		dumps = append(dumps, string(current))
	}
	return dumps
}

// matcher finds many patterns of at least 8 bytes in one pass over a text,
// so that the scan of megabytes of logs for hundreds of credentials in a
// dozen forms each stays fast: it looks up every 8-byte window of the text.
type matcher struct {
	byPrefix map[uint64][]pattern
}

type pattern struct {
	text string
	leak Leak
}

func newMatcher() *matcher { return &matcher{byPrefix: map[uint64][]pattern{}} }

func (m *matcher) add(p string, leak Leak) {
	if len(p) < minCredentialLength {
		return
	}
	key := binary.LittleEndian.Uint64([]byte(p[:8]))
	m.byPrefix[key] = append(m.byPrefix[key], pattern{text: p, leak: leak})
}

func (m *matcher) scan(text, where string, found map[Leak]bool) {
	raw := []byte(text)
	for i := 0; i+8 <= len(raw); i++ {
		candidates, ok := m.byPrefix[binary.LittleEndian.Uint64(raw[i:i+8])]
		if !ok {
			continue
		}
		for _, p := range candidates {
			if strings.HasPrefix(text[i:], p.text) {
				leak := p.leak
				if where != "" {
					leak.Form += " " + where
				}
				found[leak] = true
			}
		}
	}
}
