package route

import (
	"sync"
	"testing"
)

// TestReportAfterDoneReadsNoSlot: Report on a Decision that is already
// Done does nothing, as its comment promises, and reads none of the
// release slot's fields, which a concurrent pick may be filling once the
// slot is back in the pool. Under -race a read of the slot's index
// pointer there is a data race with that pick's charge.
func TestReportAfterDoneReadsNoSlot(t *testing.T) {
	r := indexRouter(t, Config{VirtualNodes: 16, DefaultThreshold: 1024}, fleet(3))
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				blocks := chain(uint64(g*100000+i%50), 8)
				d, err := r.TryPick(Request{Key: blocks[0], Blocks: blocks, PromptTokens: 128})
				if err != nil {
					t.Error(err)
					return
				}
				d.Done()
				// Stale: every effect is refused, whatever the slot
				// holds by now.
				d.Report(Outcome{FirstByte: true, PromptTokens: 128, CachedTokens: 0, Blocks: blocks})
			}
		}()
	}
	wg.Wait()
	if r.InFlight() != 0 {
		t.Fatalf("in flight %d", r.InFlight())
	}
	for _, m := range r.snap.Load().members {
		if p := m.st.prefill.Load(); p != 0 {
			t.Errorf("%s: prefill charge %d left", m.name, p)
		}
	}
	if n := idxOf(r).mispredictions.Load(); n != 0 {
		t.Errorf("%d mispredictions counted from stale reports", n)
	}
}
