// Package junit turns the event stream of `go test -json` into a JUnit XML
// report, the form CI systems (GitHub Actions test reporters, Jenkins,
// GitLab) display. It exists so that the nightly pipeline needs no tool
// beyond the Go toolchain and this module.
package junit

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time `json:"Time"`
	Action  string    `json:"Action"`
	Package string    `json:"Package"`
	Test    string    `json:"Test"`
	Elapsed float64   `json:"Elapsed"`
	Output  string    `json:"Output"`
}

// Suites is the JUnit document: one testsuite per Go package.
type Suites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Time     string   `xml:"time,attr"`
	Suites   []*Suite `xml:"testsuite"`
}

// Suite is one Go package's tests.
type Suite struct {
	Name      string  `xml:"name,attr"`
	Tests     int     `xml:"tests,attr"`
	Failures  int     `xml:"failures,attr"`
	Skipped   int     `xml:"skipped,attr"`
	Time      string  `xml:"time,attr"`
	Timestamp string  `xml:"timestamp,attr,omitempty"`
	Cases     []*Case `xml:"testcase"`
	// SystemOut holds the package's own output (build errors, TestMain,
	// panics outside a test), which would otherwise be lost.
	SystemOut string `xml:"system-out,omitempty"`
}

// Case is one test or subtest.
type Case struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *Message `xml:"failure,omitempty"`
	Skipped   *Message `xml:"skipped,omitempty"`
	SystemOut string   `xml:"system-out,omitempty"`
}

// Message is a failure or skip with the test's output as its body.
type Message struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

type pkgState struct {
	suite  *Suite
	cases  map[string]*Case
	output map[string]*strings.Builder
	done   bool
}

// Convert reads `go test -json` output and returns the JUnit report. Lines
// that are not JSON (go vet or build noise) are kept in the package-less
// output rather than dropped. A package that never reported an end (the
// test binary was killed by -timeout or a signal) counts as failed, and so
// do its tests still running: a truncated run must never look green.
func Convert(r io.Reader) (*Suites, error) {
	pkgs := map[string]*pkgState{}
	var order []string
	var stray strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			stray.Write(sc.Bytes())
			stray.WriteByte('\n')
			continue
		}
		p, ok := pkgs[e.Package]
		if !ok {
			p = &pkgState{suite: &Suite{Name: e.Package}, cases: map[string]*Case{}, output: map[string]*strings.Builder{}}
			if !e.Time.IsZero() {
				p.suite.Timestamp = e.Time.UTC().Format(time.RFC3339)
			}
			pkgs[e.Package] = p
			order = append(order, e.Package)
		}
		p.apply(e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return assemble(pkgs, order, stray.String()), nil
}

func (p *pkgState) apply(e event) {
	if e.Action == "output" {
		b, ok := p.output[e.Test]
		if !ok {
			b = &strings.Builder{}
			p.output[e.Test] = b
		}
		b.WriteString(e.Output)
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "pass", "fail", "skip":
			p.done = true
			p.suite.Time = seconds(e.Elapsed)
			if e.Action == "fail" {
				p.suite.Failures++ // corrected in assemble when a test explains it
			}
		}
		return
	}
	c, ok := p.cases[e.Test]
	if !ok {
		c = &Case{Name: e.Test, Classname: e.Package, Time: seconds(0)}
		p.cases[e.Test] = c
		p.suite.Cases = append(p.suite.Cases, c)
	}
	switch e.Action {
	case "pass":
		c.Failure = nil
		c.Time = seconds(e.Elapsed)
	case "fail":
		c.Time = seconds(e.Elapsed)
		c.Failure = &Message{Message: "failed"}
	case "skip":
		c.Failure = nil
		c.Time = seconds(e.Elapsed)
		c.Skipped = &Message{Message: "skipped"}
	case "run":
		// A case stays failed unless its end arrives: a binary killed
		// by -timeout or a signal never sends one.
		c.Failure = &Message{Message: "did not finish (test binary timed out or was killed)"}
	}
}

func assemble(pkgs map[string]*pkgState, order []string, stray string) *Suites {
	out := &Suites{}
	var total float64
	for _, name := range order {
		p := pkgs[name]
		s := p.suite
		pkgFailed := s.Failures > 0 || !p.done
		s.Failures = 0
		for _, c := range s.Cases {
			body := ""
			if b, ok := p.output[c.Name]; ok {
				body = b.String()
			}
			switch {
			case c.Failure != nil:
				c.Failure.Body = body
				s.Failures++
			case c.Skipped != nil:
				c.Skipped.Message = skipReason(body)
				c.Skipped.Body = body
				s.Skipped++
			default:
				c.SystemOut = body
			}
		}
		if b, ok := p.output[""]; ok {
			s.SystemOut = b.String()
		}
		if pkgFailed && s.Failures == 0 {
			// The package failed outside any test (build error, TestMain,
			// timeout before a test started): a synthetic case says so.
			s.Cases = append(s.Cases, &Case{Name: "package", Classname: name, Time: s.Time,
				Failure: &Message{Message: "package failed outside a test", Body: s.SystemOut}})
			s.Failures++
		}
		if s.Time == "" {
			s.Time = seconds(0)
		}
		sort.SliceStable(s.Cases, func(i, j int) bool { return s.Cases[i].Name < s.Cases[j].Name })
		s.Tests = len(s.Cases)
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Skipped += s.Skipped
		var secs float64
		_, _ = fmt.Sscanf(s.Time, "%f", &secs)
		total += secs
		out.Suites = append(out.Suites, s)
	}
	if strings.TrimSpace(stray) != "" {
		out.Suites = append(out.Suites, &Suite{Name: "(not go test -json output)", Time: seconds(0), SystemOut: stray})
	}
	out.Time = seconds(total)
	return out
}

// skipReason is the last line of a skipped test's output that is not the
// "--- SKIP" line itself: the t.Skip message.
func skipReason(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return "skipped"
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }

// Write encodes the report with the XML header.
func Write(w io.Writer, s *Suites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
