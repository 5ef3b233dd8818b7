package flowgate

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the calling thread's CPU time: a shared machine's wall
// clock also counts the time a benchmark spent descheduled.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// cpuPerOp locks the benchmark to its thread and, when the returned func
// runs, reports the thread's CPU time per op as cpu-ns/op.
func cpuPerOp(b *testing.B) func() {
	runtime.LockOSThread()
	start, ok := threadCPU()
	return func() {
		end, _ := threadCPU()
		runtime.UnlockOSThread()
		if ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
