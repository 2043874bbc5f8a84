package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// APIServerCPU is the CPU time kube-apiserver has spent since it started,
// its own process_cpu_seconds_total: benchmarks take the difference around
// the requests they price. It counts everything the server did meanwhile
// (watches, the controller-manager's requests), so a benchmark runs its
// requests back to back, long enough that the rest is small.
func (e *Env) APIServerCPU(ctx context.Context) (time.Duration, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return 0, err
	}
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			s, err := strconv.ParseFloat(v, 64)
			return time.Duration(s * float64(time.Second)), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	return 0, errors.New("no process_cpu_seconds_total in kube-apiserver's metrics")
}

// PriceRequests calls request b.N times back to back, i from 0, and
// reports the API server's CPU per call (APIServerCPU around the calls)
// as apiserver-cpu-ms/op.
func (e *Env) PriceRequests(b *testing.B, request func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := context.Background()
	before, err := e.APIServerCPU(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := request(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after, err := e.APIServerCPU(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((after-before).Microseconds())/1000/float64(b.N), "apiserver-cpu-ms/op")
}
