// Package normalize makes equal requests equal bytes and derives their
// routing key.
//
// It owns three things: strict validation of request bodies (RFC 8259
// grammar plus the I-JSON rules of RFC 7493: valid UTF-8, no lone
// surrogates, no duplicate member names), the canonical form every client
// language reproduces byte for byte (RFC 8785 string and number forms, JCS
// member order inside nested objects and a schema-aware member order at the
// top level of OpenAI chat, completion and native request bodies), the
// routing text and its seedless xxh3 key with the hot-prefix spill chain,
// read off the same parse that writes the canonical bytes.
//
// It does not own routing decisions (package route), HTTP content decoding
// (internal/bodydecode), the HTTP or Connect front door that maps its
// errors to status codes, backend forwarding, or
// prompt lint rules. It never repairs input: anything outside the rules is
// rejected with a reason code and the byte offset where it was found.
//
// The byte layouts that other languages reimplement are written down in
// docs/normalize.md.
package normalize
