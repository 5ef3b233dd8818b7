package route

// SplitFor is PickSplit for a request whose decode worker is already
// picked (d, from decode): a request pinned to its session's decode
// worker (PickMember) still has its prefill placed and the split decided
// as PickSplit decides it.
func SplitFor(d Decision, decode, prefill *Router, req Request) SplitPick {
	return splitAfter(d, decode, prefill, &req)
}
