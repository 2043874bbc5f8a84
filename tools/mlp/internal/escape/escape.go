// Package escape makes text from the cluster safe to print on a terminal.
//
// Condition and event messages, termination messages and every other
// string an object carries are written by others: an operator, a webhook, a
// training image. A control character in them would be acted upon by the
// user's terminal: it could move the cursor and overwrite what mlp printed
// before (a carriage return), clear the screen (CSI, also as the 8-bit
// \u009b) or write to the clipboard (OSC 52). kubectl escapes ESC and CR
// (cli-runtime's printers.EscapeTerminal); these functions write every C0
// and C1 control character, DEL, and every byte that is not UTF-8 as a
// visible Go escape (\x1b, \a, \r, \u009b), so that the text stays readable
// and nothing in it is acted upon.
package escape

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line is s for one line of output, such as a table cell, a field of
// describe or the progress line: newlines and tabs are escaped too.
func Line(s string) string { return escape(s, false) }

// Text is s for output of several lines, such as a termination message, a
// log tail or an error: newlines and tabs are kept, and a CRLF line end is
// a newline.
func Text(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	if safe(s, lines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case lines && r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			// The newline that follows ends the line.
		case kept(r, lines):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// kept says whether the character r is printed as it is.
func kept(r rune, lines bool) bool {
	return !unicode.IsControl(r) || (lines && (r == '\n' || r == '\t'))
}

// safe says whether s has nothing to escape, which is almost always so.
// (A replacement character there may stand for a byte that is not UTF-8.)
func safe(s string, lines bool) bool {
	for _, r := range s {
		if r == utf8.RuneError || !kept(r, lines) {
			return false
		}
	}
	return true
}
