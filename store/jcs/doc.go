// Package jcs implements the JSON Canonicalization Scheme (JCS) of
// RFC 8785.
//
// [AppendCanonical] parses exactly one JSON value and appends
// its canonical form: the unique byte sequence that RFC 8785
// assigns to that value, suitable for hashing and signing.
//
// # Accepted input
//
// Input must be strict RFC 8259 JSON text: a single value, optionally
// surrounded by the four JSON whitespace characters (space, tab, line
// feed, carriage return). Leading zeros, a leading '+', bare '.' in
// numbers, trailing commas, single quotes, comments, NaN/Infinity,
// unescaped control characters in strings, invalid escapes and a byte
// order mark are all rejected.
//
// In addition, as RFC 8785 requires, the input must be I-JSON (RFC 7493):
//
//   - strings and member names must be valid UTF-8 after escapes are
//     decoded, so lone surrogate escapes such as "\ud800" are rejected;
//   - an object must not repeat a member name;
//   - every number must be representable as a finite IEEE-754 double.
//
// Nesting of arrays and objects deeper than [MaxDepth] is rejected, so
// hostile input cannot exhaust the stack.
//
// Unicode noncharacters (such as U+FFFE) are valid UTF-8 and are
// accepted and emitted unchanged.
//
// # Output
//
// The canonical form has no insignificant whitespace; the literals true,
// false and null are emitted as is; object members are sorted by their
// names compared as arrays of UTF-16 code units; strings are emitted as
// UTF-8 with only '"', '\' and U+0000 to U+001F escaped (using \b, \t,
// \n, \f, \r where possible and lowercase \u00xx otherwise); numbers are
// emitted as ECMAScript's Number.prototype.toString would print them.
//
// # Numbers
//
// Every number is parsed as an IEEE-754 double (round to nearest), as
// RFC 8785 prescribes. Consequently distinct decimal texts may collapse
// to the same output: 1, 1.0, 1e0 and 10e-1 all become 1; integers
// beyond 2^53 may lose precision (9007199254740993 becomes
// 9007199254740992); numbers too small to represent become 0 (1e-400
// becomes 0) and -0 becomes 0. Numbers whose magnitude is too large for
// a double (1e400) are rejected with [ErrNumber]. Applications that need
// exact large integers must encode them as strings, as RFC 8785 advises.
//
// # Errors
//
// Every error returned wraps exactly one of [ErrSyntax],
// [ErrDuplicateKey], [ErrNumber], [ErrInvalidUTF8] or [ErrTooDeep], and
// can be tested with [errors.Is]. The message includes the byte offset in
// the input at which the problem was detected.
package jcs
