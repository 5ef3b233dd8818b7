//go:build !linux

package route

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
