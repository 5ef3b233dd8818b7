package normalize

import (
	"syscall"
	"time"
)

// threadCPU is the calling thread's CPU time. Benchmarks lock their thread
// and report CPU ns/op next to wall ns/op, because a shared machine's wall
// clock also counts time the benchmark spent descheduled.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
