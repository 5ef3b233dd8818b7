package demo

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// vocabulary is the word list documents and questions are drawn from.
var vocabulary = strings.Fields(`policy section clause customer account refund invoice
shipment warranty service contract term period notice payment balance credit limit
renewal coverage claim review audit record schedule delivery order return product
support request escalation region market report quarter revenue margin forecast
inventory supplier partner license agreement dispute settlement approval exception`)

// Document is a shared context that many requests start with.
type Document struct {
	ID   int
	Text string
}

// makeDocuments builds n deterministic documents of about words words each.
func makeDocuments(n, words int, seed uint64) []Document {
	docs := make([]Document, n)
	for i := range docs {
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		var b strings.Builder
		fmt.Fprintf(&b, "Document %d. ", i)
		for w := 0; w < words; w++ {
			b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
			if w%17 == 16 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		docs[i] = Document{ID: i, Text: b.String()}
	}
	return docs
}

// Request is one request of the workload: a document and a question.
type Request struct {
	Doc      int
	Question string
}

// makeRequests draws count requests over docs, uniformly, each with its own
// question — the long-context shape of the SageMaker experiment.
func makeRequests(count, docs int, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, 99))
	out := make([]Request, count)
	for i := range out {
		out[i] = Request{
			Doc:      rng.IntN(docs),
			Question: fmt.Sprintf("Question %d: what does the %s %s say about the %s?", i, vocabulary[rng.IntN(len(vocabulary))], vocabulary[rng.IntN(len(vocabulary))], vocabulary[rng.IntN(len(vocabulary))]),
		}
	}
	return out
}
