// Package operatortest starts an operator's manager in-process against a
// test API server, configured as every integration test needs it, and
// counts the operator's API writes.
package operatortest
