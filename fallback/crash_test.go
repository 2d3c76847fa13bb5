package fallback

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelperDrainer is not a test: TestSIGKILLMidDrain runs the test binary
// again with this test selected, as the draining process to kill.
func TestHelperDrainer(t *testing.T) {
	path, url := os.Getenv("OUTBOX_DB"), os.Getenv("OUTBOX_RECEIVER")
	if path == "" {
		t.Skip("helper process for TestSIGKILLMidDrain")
	}
	db, err := OpenSQLite(path)
	require.NoError(t, err)
	o, err := NewOutbox(context.Background(), db, OutboxConfig{Rate: 200, Lease: time.Second})
	require.NoError(t, err)
	client := &http.Client{Timeout: 5 * time.Second}
	o.Run(context.Background(), func(ctx context.Context, m Message) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(m.Payload))
		req.Header.Set("Idempotency-Key", m.Key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return CheckResponse(resp)
	})
}

// TestSIGKILLMidDrain kills the draining process mid-drain and restarts
// it: nothing is lost, and the deduping receiver accepts every key once.
func TestSIGKILLMidDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "shop.db")
	db, err := OpenSQLite(path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	require.NoError(t, err)
	ctx := context.Background()
	o, err := NewOutbox(ctx, db, OutboxConfig{})
	require.NoError(t, err)
	const n = 600
	for i := range n {
		require.NoError(t, checkout(ctx, db, o, fmt.Sprintf("%04d", i), time.Time{}, false))
	}
	db.Close()

	var mu sync.Mutex
	raw, accepted := map[string]int{}, map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		raw[key]++
		if raw[key] == 1 {
			accepted[key]++ // a deduping receiver acts on the first only
		}
		mu.Unlock()
	}))
	defer recv.Close()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(raw)
	}

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDrainer$", "-test.v")
		cmd.Env = append(os.Environ(), "OUTBOX_DB="+path, "OUTBOX_RECEIVER="+recv.URL)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		require.NoError(t, cmd.Start())
		return cmd
	}
	waitFor := func(min int, limit time.Duration) {
		deadline := time.Now().Add(limit)
		for received() < min && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling another process
		}
	}

	first := start()
	waitFor(n/3, 30*time.Second)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	first.Wait()
	killedAt := received()
	require.Greater(t, killedAt, 0)
	require.Less(t, killedAt, n, "killed mid-drain")

	second := start()
	waitFor(n, 60*time.Second)
	second.Process.Signal(syscall.SIGKILL)
	second.Wait()

	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, raw, n, "every message arrived")
	dupes := 0
	for k := range raw {
		assert.Equal(t, 1, accepted[k], "%s accepted once", k)
		dupes += raw[k] - 1
	}
	t.Logf("killed after %d of %d; %d resent after the restart (in flight or sent but not yet deleted)", killedAt, n, dupes)
	assert.LessOrEqual(t, dupes, 5, "only what was in flight at the kill is sent again")
}
