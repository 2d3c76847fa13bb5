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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/fallback/sqlite"
)

// TestHelperDrainer is not a test: TestSIGKILLMidDrain runs the test binary
// again with this test selected, as the draining process to kill.
func TestHelperDrainer(t *testing.T) {
	path, url := os.Getenv("OUTBOX_DB"), os.Getenv("OUTBOX_RECEIVER")
	if path == "" {
		t.Skip("helper process for TestSIGKILLMidDrain")
	}
	db, err := sqlite.Open(path)
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
// it: nothing is lost, and at a provider that dedupes by key nothing is
// delivered twice.
func TestSIGKILLMidDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "shop.db")
	db, err := sqlite.Open(path)
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

	// The receiver is a provider: it dedupes on the idempotency key and
	// delivers what it has taken on even if the client has gone (some
	// first requests take longer than the drainer's lease, so the drainer
	// gives up and sends them again). Deliveries are counted by message
	// text, what the recipient sees: a message resent under another key,
	// or lost, shows.
	slow := func(key string) bool { return strings.HasSuffix(key, "07") }
	var mu sync.Mutex
	requests, taken, delivered := map[string]int{}, map[string]bool{}, map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		requests[key]++
		first := !taken[key]
		taken[key] = true
		mu.Unlock()
		if !first {
			return // already taken on: answered, not delivered again
		}
		if slow(key) {
			time.Sleep(1500 * time.Millisecond) // the provider's own latency, past the 1 s lease
		}
		mu.Lock()
		delivered[string(body)]++
		mu.Unlock()
	}))
	defer recv.Close()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(requests)
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

	recv.Close() // waits for the slow deliveries
	mu.Lock()
	defer mu.Unlock()
	lost, twice, resent, slowResent := 0, 0, 0, 0
	for i := range n {
		switch delivered[fmt.Sprintf("order %04d confirmed", i)] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
		key := fmt.Sprintf("sms-%04d", i)
		if requests[key] > 1 {
			if slow(key) {
				slowResent++
			} else {
				resent += requests[key] - 1
			}
		}
	}
	assert.Zero(t, lost, "messages never delivered")
	assert.Zero(t, twice, "messages delivered twice")
	assert.Positive(t, slowResent, "slow first requests were sent again (else the dedupe was not exercised)")
	t.Logf("killed after %d of %d; %d slow ones sent again after the drainer gave up, %d others resent after the restart (in flight or sent but not yet deleted); each delivered once",
		killedAt, n, slowResent, resent)
	assert.LessOrEqual(t, resent, 5, "only what was in flight at the kill is sent again")
}
