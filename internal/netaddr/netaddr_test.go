package netaddr

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:1": true, "localhost:80": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "[::]:80": false,
		"example.com:80": false, "127.0.0.1": false, "": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"[::1]:8080", "http://[::1]:8080", ""},
		{"https://n1.example:8443/", "https://n1.example:8443", ""},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"8080", "", `"8080": want host:port (e.g. 127.0.0.1:8080) or an http:// URL`},
		{"http://", "", `"http://": want host:port or an http:// URL`},
	} {
		got, err := BaseURL(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("BaseURL(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}
