package progress

import (
	"context"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// connectionErrorInterval is the least time between two log lines about
// failed connections.
const connectionErrorInterval = time.Minute

// connectionErrors receives the http.Server's error log: one unstructured
// line per failed connection (a TLS handshake that timed out, a client
// that is not TLS), which anyone who can reach the port can multiply. It
// counts them and writes at most one structured line per interval with
// the count and the latest message, so a flood of bad connections cannot
// flood the log.
type connectionErrors struct {
	log      logr.Logger
	interval time.Duration
	metrics  *endpointMetrics
	// now is the clock; nil means time.Now.
	now func() time.Time

	mu      sync.Mutex
	count   int
	latest  string
	written time.Time
}

// logger is the *log.Logger to give the http.Server as its ErrorLog.
func (c *connectionErrors) logger() *log.Logger { return log.New(c, "", 0) }

// Write counts one line of the server's error log.
func (c *connectionErrors) Write(p []byte) (int, error) {
	c.metrics.connectionErrors(1)
	c.mu.Lock()
	c.count++
	c.latest = strings.TrimSpace(string(p))
	c.mu.Unlock()
	c.flush(false)
	return len(p), nil
}

// flush writes what was counted since the last line, if anything, once
// the interval since that line has passed (or at once when forced).
func (c *connectionErrors) flush(force bool) {
	c.mu.Lock()
	n, latest := c.count, c.latest
	now := c.clock()
	if n == 0 || (!force && now.Sub(c.written) < c.interval) {
		n = 0
	} else {
		c.count, c.latest, c.written = 0, "", now
	}
	c.mu.Unlock()
	if n > 0 {
		c.log.Info("Connections to the progress endpoint failed", "count", n, "interval", c.interval.String(), "latest", latest)
	}
}

// run flushes every interval until ctx ends, so the count of a burst that
// stopped is still written.
func (c *connectionErrors) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.flush(true)
			return
		case <-t.C:
			c.flush(false)
		}
	}
}

func (c *connectionErrors) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}
