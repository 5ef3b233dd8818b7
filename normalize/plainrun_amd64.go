//go:build !purego

package normalize

// plainChunks returns the index of the first byte of s that a string cannot
// hold without a closer look (see attention), or len(s), reading sixteen
// bytes per compare (SSE2, which every amd64 has): the word scan's
// arithmetic takes about a dozen instructions per eight bytes, a chunk
// four per sixteen. s must hold at least 16 bytes (it returns 0 for a
// shorter s). Implemented in plainrun_amd64.s.
//
//go:noescape
func plainChunks(s []byte) int
