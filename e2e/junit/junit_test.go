package junit

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

// A real stream of go test -json, shortened: a passing test, a failing
// subtest, a skipped test, and a second package whose binary was killed
// while a test ran.
const stream = `{"Time":"2026-11-23T21:00:00Z","Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestOK"}
{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"ex/a","Test":"TestOK","Elapsed":1.5}
{"Action":"run","Package":"ex/a","Test":"TestBad"}
{"Action":"run","Package":"ex/a","Test":"TestBad/sub"}
{"Action":"output","Package":"ex/a","Test":"TestBad/sub","Output":"    bad_test.go:9: tenant b read tenant a's keys\n"}
{"Action":"fail","Package":"ex/a","Test":"TestBad/sub","Elapsed":0.2}
{"Action":"fail","Package":"ex/a","Test":"TestBad","Elapsed":0.3}
{"Action":"run","Package":"ex/a","Test":"TestSkip"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"    x_test.go:3: needs ML_PLATFORM_E2E=1\n"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"ex/a","Test":"TestSkip","Elapsed":0}
{"Action":"fail","Package":"ex/a","Elapsed":2.1}
not json: a build line
{"Action":"start","Package":"ex/b"}
{"Action":"run","Package":"ex/b","Test":"TestHangs"}
{"Action":"output","Package":"ex/b","Test":"TestHangs","Output":"still waiting\n"}
`

func TestConvert(t *testing.T) {
	s, err := Convert(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if s.Tests != 5 || s.Failures != 3 || s.Skipped != 1 {
		t.Fatalf("tests/failures/skipped = %d/%d/%d, want 5/3/1", s.Tests, s.Failures, s.Skipped)
	}
	cases := map[string]*Case{}
	for _, suite := range s.Suites {
		for _, c := range suite.Cases {
			cases[c.Classname+" "+c.Name] = c
		}
	}
	if c := cases["ex/a TestBad/sub"]; c == nil || c.Failure == nil || !strings.Contains(c.Failure.Body, "tenant b read") {
		t.Errorf("failed subtest lost its output: %+v", c)
	}
	if c := cases["ex/a TestOK"]; c == nil || c.Failure != nil || c.Time != "1.500" {
		t.Errorf("passing test: %+v", c)
	}
	if c := cases["ex/a TestSkip"]; c == nil || c.Skipped == nil || c.Skipped.Message != "x_test.go:3: needs ML_PLATFORM_E2E=1" {
		t.Errorf("skip reason: %+v", c.Skipped)
	}
	// The killed package must not look green: its running test fails.
	if c := cases["ex/b TestHangs"]; c == nil || c.Failure == nil || !strings.Contains(c.Failure.Message, "did not finish") {
		t.Errorf("test of a killed binary: %+v", c)
	}
	last := s.Suites[len(s.Suites)-1]
	if !strings.Contains(last.SystemOut, "not json: a build line") {
		t.Errorf("non-JSON line lost: %+v", last)
	}
}

// A package that fails with no test failing (a build error, TestMain exit)
// gets a synthetic failing case.
func TestPackageFailureOutsideTests(t *testing.T) {
	in := `{"Action":"start","Package":"ex/c"}
{"Action":"output","Package":"ex/c","Output":"FAIL\tex/c [build failed]\n"}
{"Action":"fail","Package":"ex/c","Elapsed":0}
`
	s, err := Convert(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.Failures != 1 || s.Suites[0].Cases[0].Name != "package" || !strings.Contains(s.Suites[0].Cases[0].Failure.Body, "build failed") {
		t.Fatalf("package failure not reported: %+v", s.Suites[0])
	}
}

func TestWriteIsValidXML(t *testing.T) {
	s, err := Convert(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, s); err != nil {
		t.Fatal(err)
	}
	var back Suites
	if err := xml.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("report is not XML: %v\n%s", err, buf.String())
	}
	if back.Failures != 3 || len(back.Suites) != 3 {
		t.Fatalf("round trip: %+v", back)
	}
}
