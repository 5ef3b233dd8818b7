// Package prefixgate is the Go SDK for prefixgate: Connect clients for the
// InferenceService, NormalizeService and AdminService, the canonical JSON
// form and routing key computed locally (no server call), and a prompt
// builder whose stable content always precedes its volatile content.
//
// The canonical encoder is the normalize package itself, the reference
// implementation that the router runs, so a key computed here is the key the
// router computes. The package deliberately imports nothing of the server
// (internal/server, route, backends); the test in internal/layering guards
// that.
//
// It does not own the wire types (package gen/prefixgate/v1, generated) or the
// canonical form's rules (package normalize, documented in
// docs/normalize.md); the prompt layout is documented in docs/sdk.md.
package prefixgate
