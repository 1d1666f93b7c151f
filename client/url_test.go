package client

import (
	"errors"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		in   string
		want URL
	}{
		{"aura://127.0.0.1:8001/tpcc?http_addr=127.0.0.1:8081", URL{Host: "127.0.0.1", Port: 8001, DB: "tpcc", HTTPAddr: "127.0.0.1:8081"}},
		{"aura://cn-1.example:9/?http_addr=cn-1.example:80", URL{Host: "cn-1.example", Port: 9, HTTPAddr: "cn-1.example:80"}},
		{"aura://[::1]:8001?http_addr=[::1]:8081", URL{Host: "::1", Port: 8001, HTTPAddr: "[::1]:8081"}},
		{"aura://h:1/db?http_addr=h:2&token=s3cr%26t", URL{Host: "h", Port: 1, DB: "db", HTTPAddr: "h:2", Token: "s3cr&t"}},
	}
	for _, g := range good {
		got, err := ParseURL(g.in)
		if err != nil || got != g.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", g.in, got, err, g.want)
			continue
		}
		again, err := ParseURL(got.StringWithToken())
		if err != nil || again != got {
			t.Errorf("round trip of %q: %+v, %v", got.String(), again, err)
		}
		if got.Token != "" && strings.Contains(got.String(), got.Token) {
			t.Errorf("String shows the token: %s", got.String())
		}
	}
	bad := []struct {
		in   string
		want error
	}{
		{"http://127.0.0.1:8001/db?http_addr=127.0.0.1:8081", ErrBadScheme},
		{"127.0.0.1:8001", ErrBadScheme},
		{"aura:///db?http_addr=127.0.0.1:8081", ErrMissingHost},
		{"aura://127.0.0.1/db?http_addr=127.0.0.1:8081", ErrMissingPort},
		{"aura://127.0.0.1:0/db?http_addr=127.0.0.1:8081", ErrBadPort},
		{"aura://127.0.0.1:70000/db?http_addr=127.0.0.1:8081", ErrBadPort},
		{"aura://127.0.0.1:8001/db", ErrMissingHTTPAddr},
		{"aura://127.0.0.1:8001/db?http_addr=", ErrMissingHTTPAddr},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1", ErrBadHTTPAddr},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1:x", ErrBadHTTPAddr},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1:8081&user=x", ErrUnknownParameter},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1:8081&token=", ErrBadToken},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1:8081&token=a%20b", ErrBadToken},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1:8081&token=a&token=b", ErrUnknownParameter},
		{"aura://127.0.0.1:8001/db?http_addr=a:1&http_addr=b:2", ErrUnknownParameter},
		{"aura://127.0.0.1:8001/a/b?http_addr=127.0.0.1:8081", ErrBadURL},
		{"aura://127.0.0.1:8001/a%3Fb?http_addr=127.0.0.1:8081", ErrBadURL},
		{"aura://0:1?http_addr=%00:1", ErrBadHTTPAddr},
		{"aura://::1?http_addr=0:1", ErrBadURL},
		{"aura://0:1?http_addr=[fe80::1%25eth0]:1", ErrBadHTTPAddr},
		{"aura://0:1?http_addr=a%25b:1", ErrBadHTTPAddr},
		{"aura://u:p@127.0.0.1:8001/db?http_addr=127.0.0.1:8081", ErrBadURL},
		{"aura://127.0.0.1:8001/db?http_addr=127.0.0.1:8081#x", ErrBadURL},
		{"aura://%zz", ErrBadURL},
		{"aura://h:1/?http_addr=h:2&" + strings.Repeat("x", MaxURLBytes), ErrBadURL},
	}
	for _, b := range bad {
		_, err := ParseURL(b.in)
		var ue *URLError
		if !errors.Is(err, b.want) || !errors.As(err, &ue) {
			t.Errorf("ParseURL(%.60q) = %v, want %v", b.in, err, b.want)
		}
	}
}

// TestURLErrorsHideTheToken: a refused connection string is quoted in the
// error with its token redacted.
func TestURLErrorsHideTheToken(t *testing.T) {
	for _, in := range []string{
		"aura://h:1/db?token=hunter2&http_addr=h",
		"aura://h:0/db?http_addr=h:2&token=hunter2",
		"aura://h:1/db?http_addr=h:2&token=hunter2&token=hunter2#x",
		"aura://h:1/db?http_addr=h:2&token=hunter2%20x",
	} {
		_, err := ParseURL(in)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "token=REDACTED") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// FuzzParseURL: ParseURL never panics, and what it accepts prints back to a
// string it parses to the same URL.
func FuzzParseURL(f *testing.F) {
	f.Add("aura://127.0.0.1:8001/tpcc?http_addr=127.0.0.1:8081")
	f.Add("aura://[::1]:8001?http_addr=[::1]:8081")
	f.Add("aura://h:1/db?http_addr=h:2&x=y")
	f.Add("aura://h:1/db?http_addr=h:2&token=t0k%2Ben")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURL(s)
		if err != nil {
			var ue *URLError
			if !errors.As(err, &ue) {
				t.Fatalf("ParseURL(%q): untyped error %v", s, err)
			}
			return
		}
		again, err := ParseURL(u.StringWithToken())
		if err != nil || again != u {
			t.Fatalf("ParseURL(%q) = %+v; its StringWithToken %q parses to %+v, %v", s, u, u.StringWithToken(), again, err)
		}
	})
}
