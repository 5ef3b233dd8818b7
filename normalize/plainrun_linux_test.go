//go:build linux

package normalize

import (
	"syscall"
	"testing"
)

// TestPlainChunksPageEnd runs the scan on slices that end exactly where a
// readable page ends and the next page is PROT_NONE, and on slices that
// start exactly where it begins after a PROT_NONE page: a read of even one
// byte past a slice's end or before its start faults there (SIGSEGV)
// instead of reading a neighbour's bytes unseen. Every length from 0 to 80
// (and 255, 1000 and the page) is placed flush against each boundary,
// plain and with an odd byte at each of its 80 positions nearest the
// boundary.
func TestPlainChunksPageEnd(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 3*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap of three pages: %v", err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[:page], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect of the first page: %v", err)
	}
	if err := syscall.Mprotect(mem[2*page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect of the third page: %v", err)
	}
	readable := mem[page : 2*page : 2*page]
	for i := range readable {
		readable[i] = 'a' + byte(i%26)
	}
	check := func(s []byte) {
		t.Helper()
		if got, want := plainChunks(s), firstNeedingLook(s); got != want && !(len(s) < 16 && got == 0) {
			t.Fatalf("plainChunks(%q) at a page boundary = %d, want %d", s, got, want)
		}
	}
	for _, n := range append(makeRange(0, 80), 255, 1000, page) {
		for _, atStart := range []bool{false, true} {
			s := readable[page-n : page : page]
			if atStart {
				s = readable[:n:n]
			}
			check(s)
			for pos := range min(n, 80) {
				at := len(s) - 1 - pos // odd bytes near the end, where the tail reads
				if atStart {
					at = pos
				}
				for _, odd := range []byte{0x00, '"', '\\', 0x80, 0xff} {
					keep := s[at]
					s[at] = odd
					check(s)
					s[at] = keep
				}
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
