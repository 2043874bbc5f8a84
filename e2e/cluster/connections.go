package cluster

import (
	"fmt"
	"strings"
)

// ConnectionAttempts bounds how many rounds a ConnectionScript client waits
// for the NetworkPolicy engine to apply the policies to it (its address in
// the allowed sets, its own egress rules): engines program a new pod
// asynchronously, after it started.
const ConnectionAttempts = 90

// ConnectionScript is a busybox sh script for a client pod that must reach
// every URL of reach and be refused by every URL of deny. A URL counts as
// reached when an HTTP server answered, whatever its status (a 403 is a
// connection too), or when a TLS server answered the handshake with an
// alert: busybox's TLS offers ciphers that Go's servers (the operators'
// metrics and progress endpoints) refuse, and the alert comes over an
// established connection. Once a second it tries them all and prints one line per
// round ("round N: reach=URL ... refused=URL ..."), until three rounds in a
// row had the expected outcome, or a round after such a one differed, or
// ConnectionAttempts rounds passed; JudgeConnections reads the lines.
func ConnectionScript(reach, deny []string) string {
	// busybox 1.35's wget -T crashes: timeout bounds each attempt instead.
	return fmt.Sprintf(`connects() { timeout 5 wget -S -O /dev/null "$1" 2>&1 | grep -q -e "HTTP/" -e "TLS error from peer"; }
good=0
for i in $(seq 1 %d); do
  line=""
  for url in %s; do if connects "$url"; then line="$line reach=$url"; else line="$line refused=$url"; fi; done
  echo "round $i:$line"
  if [ "$line" = %q ]; then
    good=$((good + 1)); [ "$good" -ge 3 ] && exit 0
  elif [ "$good" -gt 0 ]; then
    exit 0
  fi
  sleep 1
done
`, ConnectionAttempts, strings.Join(append(append([]string{}, reach...), deny...), " "), expectedOutcome(reach, deny))
}

// expectedOutcome is a ConnectionScript round's line (after "round N:")
// when every URL of reach answered and every URL of deny refused.
func expectedOutcome(reach, deny []string) string {
	var b strings.Builder
	for _, u := range reach {
		b.WriteString(" reach=" + u)
	}
	for _, u := range deny {
		b.WriteString(" refused=" + u)
	}
	return b.String()
}

// JudgeConnections reads the output of ConnectionScript(reach, deny): the
// expected outcome three rounds in a row, and nothing else once it was first
// seen. Before the engine has seen the new pod, a denied URL may still
// connect or an allowed one fail; once the policy holds, it must keep
// holding.
func JudgeConnections(logs string, reach, deny []string) error {
	want := expectedOutcome(reach, deny)
	good, total := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		_, outcome, ok := strings.Cut(line, ":")
		if !strings.HasPrefix(line, "round ") || !ok {
			continue
		}
		total++
		switch {
		case outcome == want:
			good++
		case good > 0:
			return fmt.Errorf("the expected outcome held for %d round(s), then round %d was%s", good, total, outcome)
		}
	}
	if good < 3 {
		return fmt.Errorf("the expected outcome%s was not seen three rounds in a row in %d round(s)", want, total)
	}
	return nil
}

// TCPConnectionScript is ConnectionScript for servers that do not speak
// HTTP (PostgreSQL, Redis): a Python program, for images with python3 and
// for a Jupyter kernel (it never exits the interpreter), that opens a TCP
// connection to each host:port target of reach and deny once a second and
// prints the same lines, judged by JudgeConnections. A connection counts
// as reached when the handshake completed within 5 s.
func TCPConnectionScript(reach, deny []string) string {
	return fmt.Sprintf(`import socket, time
def connects(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return True
    except OSError:
        return False
def rounds(reach, deny, attempts):
    want = "".join(" reach=" + t for t in reach) + "".join(" refused=" + t for t in deny)
    good = 0
    for i in range(1, attempts + 1):
        line = "".join((" reach=" if connects(t) else " refused=") + t for t in reach + deny)
        print("round %%d:%%s" %% (i, line), flush=True)
        if line == want:
            good += 1
            if good >= 3:
                return
        elif good > 0:
            return
        time.sleep(1)
rounds(%s, %s, %d)
`, pyList(reach), pyList(deny), ConnectionAttempts)
}

// pyList is a Python list literal of plain strings (host:port targets).
func pyList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
