package testsrv

import "testing"

// TestFreeAddrOnce: FreeAddr never returns an address twice in a process,
// though the kernel may hand a port just closed to the next listener.
func TestFreeAddrOnce(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
}
