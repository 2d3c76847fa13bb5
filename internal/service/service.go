package service

import (
	"fmt"
	"strconv"
)

// Header names the service a request to a daemon's root routes is for.
const Header = "X-Brownout-Service"

// MaxName bounds a service's name, as a DNS label's.
const MaxName = 63

// Check says what is wrong with name as a service's name, or nil: 1 to
// MaxName bytes of lower-case ASCII letters, digits, '-', '_' and '.',
// starting with a letter or a digit.
func Check(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a service's name is empty")
	case len(name) > MaxName:
		return fmt.Errorf("service %s: %d bytes long: at most %d", quote(name), len(name), MaxName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return fmt.Errorf("service %s: want lower-case letters, digits, '-', '_' and '.', starting with a letter or digit", quote(name))
		}
	}
	return nil
}

// Base is the path under which a service's routes are, without the
// trailing slash: /services/{name}.
func Base(name string) string { return "/services/" + name }

// quote quotes a name for a message, at most 80 bytes of it: the name
// may be anything a client sent.
func quote(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}
