//go:build !unix

package server_test

import "testing"

// reportCPU reports nothing where getrusage is missing.
func reportCPU(b *testing.B) func() { return func() {} }
