package api

import (
	"net/http"
	"strings"
)

// idempotencyKey returns the request_id an Idempotency-Key header gives,
// "" when the header is absent. Two forms are read (docs/api.md#calling-a-tool-post-v1toolscall):
//
//   - the IETF draft's, an RFC 8941 String: `"order-7f3"`, whose unquoted
//     value (with `\"` and `\\` unescaped) is the request_id;
//   - the bare form other APIs send: `order-7f3`, taken as it is.
//
// So `"order-7f3"`, `order-7f3` and a body's "request_id":"order-7f3" are
// one identity. A header that begins with `"` but is not a valid String
// (no closing quote, a bad escape, a character a String cannot hold,
// anything but spaces after it, such as parameters) is refused, as are an
// empty header, an empty String and the header sent twice: each could
// otherwise read as another identity or as none. The runtime checks the
// rules of the request_id itself (1–255 visible ASCII characters).
func idempotencyKey(h http.Header) (string, error) {
	v, present := h["Idempotency-Key"]
	if !present {
		return "", nil
	}
	if len(v) != 1 {
		return "", invalidField("request_id", "the Idempotency-Key header must be sent once")
	}
	raw := strings.Trim(v[0], " \t")
	if raw == "" {
		return "", invalidField("request_id", "the Idempotency-Key header must not be empty; omit it to call without idempotency")
	}
	if raw[0] != '"' {
		return raw, nil
	}
	key, ok := parseSFString(raw)
	if !ok {
		return "", invalidField("request_id", `the Idempotency-Key header begins with " but is not a valid structured-field String (RFC 8941): send "<request_id>" with \" and \\ escaped, or the bare request_id`)
	}
	if key == "" {
		return "", invalidField("request_id", "the Idempotency-Key header must not be an empty String; omit it to call without idempotency")
	}
	return key, nil
}

// parseSFString parses s, which begins with a quote, as exactly one RFC
// 8941 String (§4.2.5) and returns its value. It reports false for a
// String that does not end, holds a control or non-ASCII byte or a
// backslash before anything but `"` or `\`, or is followed by anything.
func parseSFString(s string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), i == len(s)-1
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}
