package postgres

import (
	"net/url"
	"strings"
)

// redactedValue is what RedactDSN puts in place of a password.
const redactedValue = "xxxxx"

// secretParams are the connection parameters that hold a secret.
var secretParams = []string{"password", "sslpassword"}

// RedactDSN returns a connection string fit for a message or a log line,
// in either of the forms pgx (and libpq) take, with every password in it
// replaced by "xxxxx":
//
//   - a URL (postgres:// or postgresql://): the password of its userinfo
//     and the values of its password and sslpassword query parameters;
//   - keyword/value pairs ("host=/tmp user=carmy password=secret"): the
//     values of password and sslpassword, quoted ('a b', 'a\'b') or
//     not, with or without spaces around '='.
//
// A string that parses as neither gives "(unparsable connection string)":
// where its password ends cannot be told.
func RedactDSN(dsn string) string {
	if IsURLDSN(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable connection string)"
		}
		q := u.Query()
		changed := false
		for _, k := range secretParams {
			if q.Has(k) {
				q.Set(k, redactedValue)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	pairs, ok := parseKeyValues(dsn)
	if !ok {
		return "(unparsable connection string)"
	}
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(' ')
		}
		v := p.value
		for _, k := range secretParams {
			if p.key == k {
				v = redactedValue
			}
		}
		b.WriteString(p.key + "=" + quoteValue(v))
	}
	return b.String()
}

// IsURLDSN reports whether dsn is a connection URL (postgres:// or
// postgresql://).
func IsURLDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// IsKeyValueDSN reports whether dsn is a connection string of
// keyword/value pairs ("host=/tmp user=carmy dbname=carmy"): at least one
// pair, every keyword of letters, digits and '_', the syntax libpq's.
func IsKeyValueDSN(dsn string) bool {
	pairs, ok := parseKeyValues(dsn)
	return ok && len(pairs) > 0
}

// keyValue is one pair of a keyword/value connection string.
type keyValue struct{ key, value string }

// parseKeyValues parses a keyword/value connection string as libpq
// does: pairs separated by whitespace, "keyword = value" with optional
// spaces around '=', a value either single-quoted or running to the next
// whitespace, '\' escaping the character after it in either. It reports
// false for anything else.
func parseKeyValues(s string) ([]keyValue, bool) {
	var pairs []keyValue
	i := 0
	skipSpace := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skipSpace()
		if i == len(s) {
			return pairs, true
		}
		start := i
		for i < len(s) && isKeywordByte(s[i]) {
			i++
		}
		key := s[start:i]
		skipSpace()
		if key == "" || i == len(s) || s[i] != '=' {
			return nil, false
		}
		i++
		skipSpace()
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i == len(s) {
					return nil, false // an unterminated quote
				}
				c := s[i]
				if c == '\'' {
					i++
					break
				}
				if c == '\\' {
					if i+1 == len(s) {
						return nil, false
					}
					i++
					c = s[i]
				}
				v.WriteByte(c)
				i++
			}
			if i < len(s) && !isSpace(s[i]) {
				return nil, false
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					i++
					c = s[i]
				}
				v.WriteByte(c)
				i++
			}
		}
		pairs = append(pairs, keyValue{key, v.String()})
	}
}

// quoteValue writes v as a keyword/value connection string's value:
// single-quoted, with '\' and '\” escaped, when it is empty or holds
// whitespace, a quote or a backslash.
func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\f\v'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isKeywordByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
