// Package statedir finds and checks the directory where a program of this
// project keeps its state (brownoutd's operator.json and its lock, the
// shop's SQLite database): a directory private to the user that runs it,
// never a shared temporary one, where another local user could plant a
// file, hold a lock or read what is kept.
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNoDefault is Default's error when none of the places it looks at is
// set: the caller says which flag or setting names a directory instead.
var ErrNoDefault = errors.New("no private state dir: with neither $STATE_DIRECTORY, $XDG_STATE_HOME nor $HOME there is no default")

// Default returns app's state directory when none is configured:
// systemd's StateDirectory= ($STATE_DIRECTORY, the first of its list),
// else $XDG_STATE_HOME/app, else $HOME/.local/state/app (the XDG base
// directory specification's default). Relative paths in the environment
// are ignored, as the specification says. Without any of them it returns
// ErrNoDefault: there is no shared fallback.
func Default(app string, getenv func(string) string) (string, error) {
	if d, _, _ := strings.Cut(getenv("STATE_DIRECTORY"), ":"); d != "" {
		return d, nil
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, app), nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", app), nil
	}
	return "", ErrNoDefault
}

// Make creates dir when it is missing (mode 0700, its parents as needed)
// and checks that it is Private.
func Make(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return Private(dir)
}

// Private checks that dir is a directory of this process's user that
// other users cannot write into (not writable by every user; a group's
// write is the owner's choice).
func Private(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("state dir %s belongs to uid %d, not to this process's user (uid %d): chown it to this user or choose a directory of its own", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("state dir %s is writable by every user (mode %v): another user could plant files in it or hold its lock; chmod o-w %s, or choose a directory private to this user", dir, fi.Mode().Perm(), dir)
	}
	return nil
}
