// Package replica checks the list of a brownoutd's replicas that a client
// follows (the remote provider: base URLs) or pushes to (the pusher:
// endpoint URLs), and reads one from a flag or an environment variable.
//
// A list holds 1 to Max URLs, each an absolute http or https URL with a
// host, no credentials (they would show in logs and in every health
// report) and no fragment; base URLs take no query either, since the
// client appends its API paths. No replica may appear twice: URLs are
// compared with the scheme and host in lower case, a default port
// dropped and trailing slashes trimmed, so that "http://a/" and
// "HTTP://a:80" are one. Check returns the URLs as given (base URLs
// without their trailing slashes), in the order given: the order the
// remote provider moves through them.
//
// Errors name the URL and what is wrong with it, without a package
// prefix: the caller adds its own ("provider: remote: …").
package replica

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// Max bounds a list: a client keeps a little state and, for the pusher,
// one goroutine per URL; a daemon runs as two or three replicas.
const Max = 16

// maxShown bounds how much of a bad input an error quotes.
const maxShown = 200

// Check validates urls and returns them, base URLs without trailing
// slashes. base says whether they are base URLs (no query: the client appends
// its paths) or endpoints (a query is kept).
func Check(urls []string, base bool) ([]string, error) {
	example := "http://brownoutd:8080"
	if !base {
		example += "/v1/signals"
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("no URL: want one per replica, e.g. %s", example)
	}
	if len(urls) > Max {
		return nil, fmt.Errorf("%d URLs: at most %d", len(urls), Max)
	}
	out := make([]string, len(urls))
	seen := make(map[string]string, len(urls))
	for i, raw := range urls {
		key, err := check(raw, base, example)
		if err != nil {
			return nil, fmt.Errorf("URL %q: %w", shown(raw), err)
		}
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("URLs %q and %q: the same replica twice", shown(prev), shown(raw))
		}
		seen[key] = raw
		out[i] = raw
		if base {
			out[i] = strings.TrimRight(raw, "/")
		}
	}
	return out, nil
}

// Parse reads a comma-separated list of base URLs, as a flag or an
// environment variable gives it: "http://a:8080,http://b:8080" (spaces
// around the commas are ignored), and checks it as Check does.
func Parse(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return Check(nil, true)
	}
	parts := strings.Split(s, ",")
	if len(parts) > Max {
		return nil, fmt.Errorf("%d URLs: at most %d", len(parts), Max)
	}
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, fmt.Errorf("URL %d of %d is empty: want base URLs separated by commas", i+1, len(parts))
		}
	}
	return Check(parts, true)
}

// check validates one URL and returns its key for duplicates.
func check(raw string, base bool, example string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || raw == "":
		return "", errors.New("not a URL")
	case strings.ContainsFunc(raw, unicode.IsSpace):
		return "", errors.New("a space in the URL")
	case u.Scheme != "http" && u.Scheme != "https": // url.Parse lowers it
		return "", fmt.Errorf("want an http or https URL, e.g. %s", example)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return "", errors.New("no host")
	case strings.HasSuffix(u.Host, ":"):
		return "", errors.New("empty port")
	case u.User != nil:
		return "", errors.New("credentials in the URL are not supported: they would show in logs and health reports; use the token")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", errors.New("a fragment: want none")
	case base && (u.RawQuery != "" || u.ForceQuery):
		return "", errors.New("a query: want none, the client appends its API paths")
	}
	host := strings.ToLower(u.Hostname())
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	key := scheme + "://" + host
	if port != "" {
		key += ":" + port
	}
	key += strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		key += "?" + u.RawQuery
	}
	return key, nil
}

func shown(s string) string {
	if len(s) > maxShown {
		return strings.ToValidUTF8(s[:maxShown], "") + "…"
	}
	return s
}
