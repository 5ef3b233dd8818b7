//go:build linux

package normalize

import (
	"syscall"
	"testing"
)

// TestPlainChunksPageEnd runs the scan on slices that end exactly where a
// readable page ends and the next page is PROT_NONE: a read of even one
// byte past a slice's end faults there (SIGSEGV) instead of reading a
// neighbour's bytes unseen. Every length from 0 to 80 is placed flush
// against the boundary, plain and with an odd byte at each position, and
// a longer run with its whole 16-byte tail at the boundary.
func TestPlainChunksPageEnd(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap of two pages: %v", err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect of the second page: %v", err)
	}
	readable := mem[:page]
	for i := range readable {
		readable[i] = 'a' + byte(i%26)
	}
	check := func(s []byte) {
		t.Helper()
		if got, want := plainChunks(s), firstNeedingLook(s); got != want && !(len(s) < 16 && got == 0) {
			t.Fatalf("plainChunks(%q) at the page's end = %d, want %d", s, got, want)
		}
	}
	for _, n := range append(makeRange(0, 80), 255, 1000, page) {
		s := readable[page-n : page : page]
		check(s)
		for pos := range min(n, 80) {
			for _, odd := range []byte{0x00, '"', '\\', 0x80, 0xff} {
				at := len(s) - 1 - pos // odd bytes near the end, where the tail reads
				keep := s[at]
				s[at] = odd
				check(s)
				s[at] = keep
			}
		}
	}
}

func makeRange(lo, hi int) []int {
	out := make([]int, 0, hi-lo+1)
	for n := lo; n <= hi; n++ {
		out = append(out, n)
	}
	return out
}
