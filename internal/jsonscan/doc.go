// Package jsonscan is Carmy's one scanner of JSON text and its one
// string escaper, over []byte and with the standard library only (so that
// store/jcs, below every other package, may use it).
//
// The scanner reads tokens where they start and says where they end:
// [SkipSpace], [ScanString] (syntax, with what the string holds),
// [AppendUnquoted] (a string decoded, held to I-JSON: valid UTF-8, no lone
// surrogate), [ScanNumber], [ScanLiteral], and whole values: [ScanValue]
// and [Valid] (the syntax encoding/json's Valid accepts, byte for byte:
// FuzzValidMatchesEncodingJSON), [ObjectMembers] and [ArrayElements] (the
// members of one object, the elements of one array, checked as Valid
// checks them). Its users are the RFC 8785
// canonicaliser (store/jcs: its parser and its check of canonical input),
// the strict decoding of request bodies (package api) and the check of
// stored results before they are written out.
//
// [AppendString] is the escaper, with three sets of rules: RFC 8785's
// ([Canonical]), encoding/json's default ([HTMLSafe]) and encoding/json's
// without HTML escapes ([NoHTML]), which is also how [MarshalNoHTML]
// encodes a value (the MCP SDK's encoding).
//
// Errors are *[Error]: a [Kind], the byte offset and what is wrong.
package jsonscan
