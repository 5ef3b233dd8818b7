package llamafleet

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
)

// Workload sizes: bounded so the whole suite stays a few minutes on two
// cores (see docs/backends.md for the measured time).
const (
	replicas     = 4
	numDocs      = 12
	questionsPer = 5
	docChars     = 1200
	workers      = replicas
)

// documents returns n distinct documents of about docChars characters, made
// from a seeded generator so every run sends the same text.
func documents(n int) []string {
	rng := rand.New(rand.NewPCG(7, 11))
	syll := []string{"ka", "lo", "mi", "ter", "ra", "vo", "sen", "du", "pa", "gri", "nel", "os", "ume", "ti", "bar", "quo"}
	word := func() string {
		var b strings.Builder
		for k := 1 + rng.IntN(3); k > 0; k-- {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		return b.String()
	}
	docs := make([]string, n)
	for i := range docs {
		var b strings.Builder
		fmt.Fprintf(&b, "Report %s-%d on the %s %s.", word(), i, word(), word())
		for b.Len() < docChars {
			b.WriteString(" ")
			for w := 6 + rng.IntN(8); w > 0; w-- {
				b.WriteString(word())
				if w > 1 {
					b.WriteString(" ")
				}
			}
			b.WriteString(".")
		}
		docs[i] = b.String()
	}
	return docs
}

func question(doc, q int) string {
	return fmt.Sprintf("Question %d about report %d: what does paragraph %d say about the %d-th item?", q, doc, q+1, doc*7+q)
}

// qaMessages is a retrieval-style request: the document in the system
// message, the question after it.
func qaMessages(docs []string, d, q int) []message {
	return []message{
		{Role: "system", Content: "Answer from this document only.\n\n" + docs[d]},
		{Role: "user", Content: question(d, q)},
	}
}

// qaRequest names one question of one document.
type qaRequest struct{ doc, q int }

// qaOrder interleaves the documents: round r holds every document's r-th
// question in a seeded shuffle, so each document's questions are spread over
// the run the way independent users would send them.
func qaOrder(rounds int) [][]qaRequest {
	rng := rand.New(rand.NewPCG(3, 5))
	out := make([][]qaRequest, rounds)
	for r := range out {
		for _, d := range rng.Perm(numDocs) {
			out[r] = append(out[r], qaRequest{doc: d, q: r})
		}
	}
	return out
}

// runRound sends requests in their order with `workers` concurrent
// clients, each sending its next request when its previous answer came back
// (a closed loop); target says where each request goes. onStart, when set,
// is called with the request's index as it is sent.
func runRound(round []qaRequest, docs []string, target func(qaRequest) string, onStart func(int)) []answer {
	out := make([]answer, len(round))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if onStart != nil {
					onStart(i)
				}
				base := target(round[i])
				a := chat(base, qaMessages(docs, round[i].doc, round[i].q))
				if a.backend == "" {
					a.backend = base
				}
				a.client = w
				out[i] = a
			}
		}()
	}
	for i := range round {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// conversation is one multi-turn chat: turn 1 pastes a document and asks,
// later turns carry the history and ask follow-ups.
type conversation struct {
	doc      int
	msgs     []message
	backends []string // the backend of each turn so far
}

// turnResult is one follow-up turn's outcome.
type turnResult struct {
	answer
	turn         int
	samePrevious bool
}

// chatTurn is one sent turn with what it carried, for the simulator replay.
type chatTurn struct {
	conv, doc int
	msgs      []message
	answer
}

// runChats runs the conversations, `workers` at a time, each turn after the
// previous one's answer; target says where each turn goes (given the
// conversation index). It returns every answer, the follow-up turns and
// every turn with its messages.
func runChats(docs []string, convs, turns int, target func(c int) string) ([]answer, []turnResult, []chatTurn) {
	var mu sync.Mutex
	var all []answer
	var follow []turnResult
	var sent []chatTurn
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				cv := conversation{doc: c % len(docs)}
				for turn := 0; turn < turns; turn++ {
					var text string
					if turn == 0 {
						text = "Please read this report.\n\n" + docs[cv.doc] + "\n\n" + question(cv.doc, 0)
					} else {
						text = question(cv.doc, turn)
					}
					cv.msgs = append(cv.msgs, message{Role: "user", Content: text})
					base := target(c)
					a := chat(base, cv.msgs)
					if a.backend == "" {
						a.backend = base
					}
					a.client = w
					mu.Lock()
					all = append(all, a)
					sent = append(sent, chatTurn{conv: c, doc: cv.doc, msgs: append([]message(nil), cv.msgs...), answer: a})
					if turn > 0 {
						follow = append(follow, turnResult{answer: a, turn: turn, samePrevious: a.backend == cv.backends[turn-1]})
					}
					mu.Unlock()
					if a.err != nil {
						break
					}
					cv.backends = append(cv.backends, a.backend)
					cv.msgs = append(cv.msgs, message{Role: "assistant", Content: a.content})
				}
			}
		}()
	}
	for c := 0; c < convs; c++ {
		next <- c
	}
	close(next)
	wg.Wait()
	return all, follow, sent
}
