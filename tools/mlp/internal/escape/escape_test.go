package escape

import "testing"

func TestEscape(t *testing.T) {
	for name, tc := range map[string]struct {
		in, wantLine, wantText string
	}{
		"plain text": {
			in: "PodsRefused: 0/3 nodes are available ✓", wantLine: "PodsRefused: 0/3 nodes are available ✓", wantText: "PodsRefused: 0/3 nodes are available ✓",
		},
		"OSC 52 clipboard write": {
			in: "\x1b]52;c;aGk=\x07", wantLine: `\x1b]52;c;aGk=\a`, wantText: `\x1b]52;c;aGk=\a`,
		},
		"carriage return that overwrites the line": {
			in: "real error\rTrainingJob succeeded", wantLine: `real error\rTrainingJob succeeded`, wantText: `real error\rTrainingJob succeeded`,
		},
		"C1 CSI, as a character and as a byte that is not UTF-8": {
			in: "\u009b2J \x9b2J", wantLine: `\u009b2J \x9b2J`, wantText: `\u009b2J \x9b2J`,
		},
		"DEL, backspace and NUL": {
			in: "a\x7fb\bc\x00", wantLine: `a\x7fb\bc\x00`, wantText: `a\x7fb\bc\x00`,
		},
		"lines and tabs": {
			in: "a\tb\r\nc\n", wantLine: `a\tb\r\nc\n`, wantText: "a\tb\nc\n",
		},
		"a carriage return alone at the end": {
			in: "fake line\r", wantLine: `fake line\r`, wantText: `fake line\r`,
		},
		"the replacement character itself": {
			in: "\uFFFD", wantLine: "\uFFFD", wantText: "\uFFFD",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Line(tc.in); got != tc.wantLine {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.wantLine)
			}
			if got := Text(tc.in); got != tc.wantText {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.wantText)
			}
		})
	}
}
