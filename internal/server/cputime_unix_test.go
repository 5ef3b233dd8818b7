//go:build unix

package server_test

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU reports the process's user + system CPU time per op (client,
// router and backend together, all in this process) from when it is
// called to when the function it returns is: on a loaded machine it moves
// far less than ns/op, which counts waits for a core.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}
