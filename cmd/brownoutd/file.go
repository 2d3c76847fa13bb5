package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// The bounds of the files the daemon reads at start and on SIGHUP. A
// configuration at every bound of the controller (dimmer.MaxFeatures
// named features, dimmer.MaxSegments segments, a schedule) is under
// 200 KB, and a token line about 60 bytes: 1 MiB is room for either with
// a wide margin, and small enough that a mistaken path (a log, a device)
// fails at once instead of filling the memory.
const (
	maxConfigFile = 1 << 20
	maxTokensFile = 1 << 20
)

// readFile reads a regular file of at most limit bytes. Anything else — a
// device such as /dev/zero, a FIFO, a directory, a larger file — is
// refused with an error that says so: it would never end, block the
// reload, or is not what the setting names. Symbolic links are followed
// (to a regular file they are fine).
func readFile(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO without a writer would block; on a
	// regular file it changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file but %s", path, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes: at most %d", path, fi.Size(), limit)
	}
	// The file may grow after Stat: read one byte past the limit to tell.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes", path, limit)
	}
	return b, nil
}

// kind names what a file that is not regular is.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}
