package progress

import (
	"bytes"
	"io"
)

// readAtMost reads r to its end, or up to n bytes.
func readAtMost(r io.Reader, n int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := io.Copy(&buf, io.LimitReader(r, n))
	return buf.Bytes(), err
}
