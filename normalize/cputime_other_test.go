//go:build !linux

package normalize

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
