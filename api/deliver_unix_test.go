//go:build unix

package api

import (
	"bytes"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeliverLeavesTheRestToThePump: a round written directly that the
// socket takes in part leaves the rest to the stream's pump, first; the
// next round waits behind it, pending, and the pump is woken.
func TestDeliverLeavesTheRestToThePump(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	ours, _ := conn(fds[0]), conn(fds[1])
	raw, err := ours.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	s := newHub().join()
	s.direct(raw)

	big := bytes.Repeat([]byte("x"), 8<<20) // more than a socket's buffers
	r := &fanRound{chunk: big}
	r.msgs[kindState] = big
	s.deliver(r)
	s.mu.Lock()
	rest := s.partial
	s.mu.Unlock()
	require.NotEmpty(t, rest, "the socket took it all")
	assert.Less(t, len(rest), len(big), "the socket took part of it")
	assert.Equal(t, &big[len(big)-len(rest)], &rest[0], "the rest is the round's own bytes")

	next := &fanRound{chunk: []byte("6\r\nnext\n\n\r\n")}
	next.msgs[kindTick] = []byte("next\n\n")
	s.deliver(next)
	select {
	case <-s.wake:
	default:
		t.Fatal("the pump was not woken")
	}
	var buf [takeRoom][]byte
	msgs, partial, _ := s.take(&buf)
	assert.Equal(t, len(rest), len(partial), "the rest first")
	assert.Equal(t, [][]byte{[]byte("next\n\n")}, msgs, "then the next round, pending")
}

// TestStreamOpensWithItsFirstMessage: a round fanned out between a
// stream's join and its first message — a replica's tick event — is
// written after that message, so that a replica's stream opens with its
// replica event and then the state (the pending messages alone are
// written in kind order, which put the tick's replica event first).
func TestStreamOpensWithItsFirstMessage(t *testing.T) {
	s := newHub().join()
	tick := &fanRound{}
	tick.msgs[kindReplica] = []byte("event: replica\n\n")
	s.deliver(tick) // not yet writable: pending
	s.open([]byte("event: replica\n\n"), []byte("event: state\n\n"))
	var buf [takeRoom][]byte
	msgs, _, _ := s.take(&buf)
	assert.Equal(t, [][]byte{[]byte("event: replica\n\n"), []byte("event: state\n\n"), []byte("event: replica\n\n")}, msgs)
	msgs, _, _ = s.take(&buf)
	assert.Empty(t, msgs, "taken once")
}
