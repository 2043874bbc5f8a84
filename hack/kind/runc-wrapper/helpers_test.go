package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func jsonReader(s string) io.Reader { return strings.NewReader(s) }

// decode parses JSON into generic values so that comparisons ignore key order.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
