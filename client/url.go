package client

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Scheme is the scheme of AURA connection strings (SPEC §8).
const Scheme = "aura"

// MaxURLBytes bounds a connection string: 2 KiB is far above any
// HOST:PORT/DB?http_addr=HOST:PORT and keeps a hostile string cheap to refuse.
const MaxURLBytes = 2048

// URL is a parsed connection string aura://HOST:PORT/DB?http_addr=HOST:PORT.
type URL struct {
	// Host and Port are a node's protoactor remote address: the worker the
	// client submits to while the management API has never answered.
	Host string
	Port int
	// DB is the path's database name ("" when the path is empty). The
	// cluster serves one database; the name is kept for the caller.
	DB string
	// HTTPAddr is the HOST:PORT of a node's management API (aura node
	// --http).
	HTTPAddr string
	// Token is the management API's bearer token (the optional token query
	// parameter; aura node --auth-token), "" when it has none. String and
	// errors never show it.
	Token string
}

// MaxTokenBytes bounds a bearer token: 256 bytes hold any random token
// with room to spare, and keep the header small.
const MaxTokenBytes = 256

// CheckToken accepts 1..MaxTokenBytes bytes of visible ASCII (no spaces):
// what a bearer token header and a query parameter carry unchanged.
func CheckToken(tok string) error {
	if tok == "" || len(tok) > MaxTokenBytes {
		return fmt.Errorf("token of %d bytes, want 1..%d", len(tok), MaxTokenBytes)
	}
	for _, c := range []byte(tok) {
		if c <= ' ' || c > '~' {
			return errors.New("token has a byte outside visible ASCII")
		}
	}
	return nil
}

// Addr returns HOST:PORT of the node's remote address.
func (u URL) Addr() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// String returns the connection string, with the token (if any) replaced
// by "REDACTED" so that it is safe to log.
func (u URL) String() string {
	s := fmt.Sprintf("%s://%s/%s?http_addr=%s", Scheme, u.Addr(), u.DB, u.HTTPAddr)
	if u.Token != "" {
		s += "&token=REDACTED"
	}
	return s
}

// StringWithToken returns the connection string with the token: for
// handing to another process, never for logging.
func (u URL) StringWithToken() string {
	s := fmt.Sprintf("%s://%s/%s?http_addr=%s", Scheme, u.Addr(), u.DB, u.HTTPAddr)
	if u.Token != "" {
		s += "&token=" + url.QueryEscape(u.Token)
	}
	return s
}

// Sentinel errors, wrapped in a *URLError by ParseURL.
var (
	// ErrBadURL: not a URL at all, or longer than MaxURLBytes.
	ErrBadURL = errors.New("malformed connection string")
	// ErrBadScheme: a scheme other than aura.
	ErrBadScheme = errors.New("scheme must be aura")
	// ErrMissingHost: no HOST:PORT after aura://.
	ErrMissingHost = errors.New("missing host")
	// ErrMissingPort: HOST without :PORT.
	ErrMissingPort = errors.New("missing port")
	// ErrBadPort: a port that is not a number in 1..65535.
	ErrBadPort = errors.New("bad port")
	// ErrMissingHTTPAddr: no http_addr query parameter, or an empty one.
	ErrMissingHTTPAddr = errors.New("missing http_addr")
	// ErrBadHTTPAddr: an http_addr that is not HOST:PORT with a port in
	// 1..65535.
	ErrBadHTTPAddr = errors.New("bad http_addr")
	// ErrUnknownParameter: a query parameter other than http_addr and
	// token, or one given twice.
	ErrUnknownParameter = errors.New("unknown query parameter")
	// ErrBadToken: an empty token, or one that CheckToken refuses.
	ErrBadToken = errors.New("bad token")
)

// URLError reports why a connection string was refused; errors.Is matches
// its sentinel.
type URLError struct {
	// Input is the refused string, cut to 128 bytes.
	Input string
	// Err is one of the sentinels above.
	Err error
	// Detail says more (the offending part), possibly empty.
	Detail string
}

func (e *URLError) Error() string {
	s := fmt.Sprintf("connection string %q: %v", e.Input, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s + " (want aura://HOST:PORT/DB?http_addr=HOST:PORT[&token=T])"
}

func (e *URLError) Unwrap() error { return e.Err }

// ParseURL parses aura://HOST:PORT/DB?http_addr=HOST:PORT[&token=T]. HOST
// may be a name, an IPv4 address or a bracketed IPv6 address; both ports
// must be in 1..65535 (port 0 names no listener); DB is optional (letters,
// digits, '.', '_', '-'), and so is the host of http_addr (or an IPv6
// address), so that String writes back what was parsed; token is
// the management API's bearer token (CheckToken). It never panics, and its
// errors never show the token.
func ParseURL(s string) (URL, error) {
	in := redactToken(s)
	if len(in) > 128 {
		in = in[:128] + "…"
	}
	fail := func(err error, detail string, args ...any) (URL, error) {
		return URL{}, &URLError{Input: in, Err: err, Detail: fmt.Sprintf(detail, args...)}
	}
	if len(s) > MaxURLBytes {
		return fail(ErrBadURL, "%d bytes, at most %d", len(s), MaxURLBytes)
	}
	scheme, _, found := strings.Cut(s, "://")
	if !found {
		return fail(ErrBadScheme, "no %s:// prefix", Scheme)
	}
	if scheme != Scheme {
		return fail(ErrBadScheme, "got %q", scheme)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fail(ErrBadURL, "%v", errors.Unwrap(err))
	}
	if u.Scheme != Scheme {
		return fail(ErrBadScheme, "got %q", u.Scheme)
	}
	if u.Opaque != "" || u.User != nil || u.Fragment != "" {
		return fail(ErrBadURL, "no user info, fragment or opaque part allowed")
	}
	if u.Host == "" {
		return fail(ErrMissingHost, "")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return fail(ErrMissingHost, "")
	}
	if !hostChars(host) {
		return fail(ErrBadURL, "host %q is not a name or an IP address", host)
	}
	if port == "" {
		return fail(ErrMissingPort, "%q", u.Host)
	}
	p, ok := parsePort(port)
	if !ok {
		return fail(ErrBadPort, "%q", port)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if !nameChars(db) {
		return fail(ErrBadURL, "database name %q: only letters, digits, '.', '_' and '-'", db)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail(ErrBadURL, "query: %v", err)
	}
	for k, v := range q {
		if k != "http_addr" && k != "token" || len(v) != 1 {
			return fail(ErrUnknownParameter, "%q", k)
		}
	}
	tok, hasTok := q["token"]
	if hasTok {
		if err := CheckToken(tok[0]); err != nil {
			return fail(ErrBadToken, "%v", err)
		}
	}
	ha := q.Get("http_addr")
	if ha == "" {
		return fail(ErrMissingHTTPAddr, "")
	}
	hh, hp, err := net.SplitHostPort(ha)
	if err != nil || hh == "" || !hostChars(hh) {
		return fail(ErrBadHTTPAddr, "%q", ha)
	}
	if _, ok := parsePort(hp); !ok {
		return fail(ErrBadHTTPAddr, "%q: port", ha)
	}
	return URL{Host: host, Port: p, DB: db, HTTPAddr: ha, Token: q.Get("token")}, nil
}

// redactToken replaces the value after every "token=" of a raw connection
// string, so that errors quoting it do not leak the token.
func redactToken(s string) string {
	const k = "token="
	var b strings.Builder
	for {
		i := strings.Index(s, k)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len(k)])
		b.WriteString("REDACTED")
		s = s[i+len(k):]
		if j := strings.IndexAny(s, "&#"); j >= 0 {
			s = s[j:]
		} else {
			s = ""
		}
	}
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	p, err := strconv.Atoi(s)
	return p, err == nil && p >= 1 && p <= 65535
}

// hostChars reports whether h is a host name or an IPv4 address (letters,
// digits, '.', '_', '-') or an IPv6 address: what net.JoinHostPort writes
// back unchanged.
func hostChars(h string) bool {
	if strings.Contains(h, ":") {
		return net.ParseIP(h) != nil
	}
	return nameChars(h)
}

// nameChars reports whether s holds only letters, digits, '.', '_' and
// '-': what a host name, an IPv4 address or a database name is made of
// (hostChars checks IPv6 addresses with net.ParseIP). Anything else — control bytes,
// '%', '?', '/', '&' — would have to be escaped to be written back into a
// connection string (URL.String), so it is refused instead.
func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
