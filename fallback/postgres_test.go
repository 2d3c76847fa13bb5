package fallback

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startPostgres runs a throwaway PostgreSQL server on 127.0.0.1 in a temp
// directory and returns a DSN. It skips, saying why, where it cannot (in CI
// .ci/run installs PostgreSQL, so there it fails instead).
func startPostgres(t *testing.T) string {
	t.Helper()
	skip := func(format string, a ...any) {
		if os.Getenv("CI") != "" {
			t.Fatalf("postgres in CI: "+format, a...)
		}
		t.Skipf("postgres unavailable: "+format, a...)
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		skip("no initdb under /usr/lib/postgresql (apt-get install postgresql)")
	}
	bin := filepath.Dir(matches[len(matches)-1])
	dir, err := os.MkdirTemp("", "brownout-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	var prefix []string
	if os.Geteuid() == 0 { // initdb refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			skip("running as root and there is no postgres user")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
		prefix = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) {
		cmd := exec.Command(append(prefix, args...)[0], append(prefix, args...)[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			skip("%v: %v\n%s", args, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(dir, "data")
	run(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	run(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off", port, dir), "start")
	t.Cleanup(func() {
		exec.Command(append(prefix, filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop")[0],
			append(prefix, filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop")[1:]...).Run()
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

func TestOutboxPostgres(t *testing.T) {
	dsn := startPostgres(t)
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	require.NoError(t, err)
	o, err := NewOutbox(ctx, db, OutboxConfig{Dialect: Postgres, Rate: 5000, Batch: 20})
	require.NoError(t, err)

	// Same transaction as the order: a failed checkout leaves neither.
	require.Error(t, pgCheckout(ctx, db, o, "declined", true))
	const n = 400
	for i := range n {
		require.NoError(t, pgCheckout(ctx, db, o, fmt.Sprintf("%04d", i), false))
	}
	st, err := o.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, n, st.Depth)

	// Two drainers share the outbox (FOR UPDATE SKIP LOCKED): each message
	// goes out once.
	var mu sync.Mutex
	got := map[string]int{}
	send := func(_ context.Context, m Message) error {
		mu.Lock()
		got[m.Key]++
		mu.Unlock()
		return nil
	}
	o2, err := NewOutbox(ctx, db, OutboxConfig{Dialect: Postgres, Rate: 5000, Batch: 20})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, box := range []*Outbox{o, o2} {
		wg.Go(func() {
			for dctx.Err() == nil {
				if st, _ := box.Stats(dctx); st.Depth == 0 {
					return
				}
				if _, err := box.DrainOnce(dctx, send); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Len(t, got, n)
	for k, c := range got {
		assert.Equal(t, 1, c, k)
	}
	t.Logf("drainer 1 sent %d, drainer 2 sent %d", o.sent.Load(), o2.sent.Load())
}

func pgCheckout(ctx context.Context, db *sql.DB, o *Outbox, id string, fail bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, id, 4200); err != nil {
		return err
	}
	if err := o.Enqueue(ctx, tx, Message{Key: "sms-" + id, Topic: "sms", Payload: []byte(id)}); err != nil {
		return err
	}
	if fail {
		return fmt.Errorf("payment declined")
	}
	return tx.Commit()
}
