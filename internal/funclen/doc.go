// Package funclen holds no code, only the test that keeps every function of
// prefixgate's hand-written Go short enough to read on one screen: at most
// MaxLines lines from its func keyword to its closing brace. Generated files
// and tests are left out; a function that is only a literal table may stay
// longer when the test's allowlist names it with the reason.
package funclen

// MaxLines is the longest a hand-written function may be, in lines.
const MaxLines = 80
