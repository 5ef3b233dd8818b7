// Package lint finds what in a set of request bodies would cost prefix cache
// hits before production traffic does.
//
// It owns the lint rules (volatile values inside the routing window,
// metadata sent ahead of the prompt, non-canonical serialization, windows
// that cover the whole prompt, templates that inject today's date, related
// requests that split on a small difference, keys that carry more than their
// share of traffic), the choice of a prefix length for a corpus, and the
// text, JSON and SARIF renderings of a report. The CLI (prefixgate lint) and
// the NormalizeService.Lint RPC both run Check.
//
// It does not own the canonical form, the routing key or the routing text's
// layout: it asks package normalize for all three (LayOutRoutingText gives
// the text with the canonical span of each value in it), so that a position
// inside the window can be mapped back to a JSON path and a character
// offset. It reads no files and keeps no state between calls.
//
// The rules, their thresholds and the prefix-length method are written down
// in docs/lint.md.
package lint
