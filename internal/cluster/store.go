package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
)

// SchemaVersion is the version of the tables this package writes. A
// database whose brownout_schema says more was made by a newer brownoutd:
// Open refuses it rather than write what that version would misread.
const SchemaVersion = 1

// DefaultService is the service of a daemon that serves one: every table
// is keyed by service, so that a daemon of several services shares the
// tables.
const DefaultService = "default"

// channel is the LISTEN/NOTIFY channel: payloads "published <service>",
// "ops <service>", "lease <service>".
const channel = "brownout"

// schema creates the tables, idempotently. Every time is the database's
// (now()), so that the replicas' clocks never decide anything.
const schema = `
CREATE TABLE IF NOT EXISTS brownout_schema (version int NOT NULL);
CREATE TABLE IF NOT EXISTS brownout_cluster (
	id int PRIMARY KEY CHECK (id = 1),
	epoch bigint NOT NULL,
	secret bytea NOT NULL,
	created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS brownout_lease (
	service text PRIMARY KEY,
	term bigint NOT NULL DEFAULT 0,
	holder text NOT NULL DEFAULT '',
	expires timestamptz NOT NULL DEFAULT 'epoch',
	since timestamptz);
CREATE TABLE IF NOT EXISTS brownout_published (
	service text PRIMARY KEY,
	term bigint NOT NULL DEFAULT 0,
	holder text NOT NULL DEFAULT '',
	generation bigint NOT NULL DEFAULT 0,
	checkpoint jsonb,
	config_hash text NOT NULL DEFAULT '',
	ops_version bigint NOT NULL DEFAULT 0,
	at timestamptz);
CREATE TABLE IF NOT EXISTS brownout_operator (
	service text PRIMARY KEY,
	version bigint NOT NULL DEFAULT 0,
	frozen boolean NOT NULL DEFAULT false,
	freeze_reason text NOT NULL DEFAULT '',
	shadow boolean NOT NULL DEFAULT false,
	event_seq bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS brownout_override (
	service text NOT NULL,
	feature text NOT NULL,
	level double precision NOT NULL,
	until timestamptz NOT NULL,
	reason text NOT NULL,
	who text NOT NULL,
	PRIMARY KEY (service, feature));
CREATE TABLE IF NOT EXISTS brownout_event (
	service text NOT NULL,
	seq bigint NOT NULL,
	at timestamptz NOT NULL,
	kind text NOT NULL,
	feature text NOT NULL DEFAULT '',
	who text NOT NULL DEFAULT '',
	what text NOT NULL,
	reason text NOT NULL DEFAULT '',
	PRIMARY KEY (service, seq));
CREATE TABLE IF NOT EXISTS brownout_history (
	service text NOT NULL,
	at timestamptz NOT NULL,
	point jsonb NOT NULL,
	PRIMARY KEY (service, at));
CREATE TABLE IF NOT EXISTS brownout_replica (
	service text NOT NULL,
	name text NOT NULL,
	config_hash text NOT NULL,
	version text NOT NULL,
	started timestamptz NOT NULL DEFAULT now(),
	seen timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (service, name));
`

// ErrNewerSchema: the database was set up by a newer brownoutd.
var ErrNewerSchema = errors.New("cluster: the store's schema is newer than this brownoutd's")

// Redact returns a store URL without its password, for messages: the
// user info's, and the query's password= and sslpassword= (libpq takes
// either there, as pgx does). The rest of the query stays as written.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a store URL that does not parse)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if key, err := url.QueryUnescape(k); err != nil || secretParams[key] {
				parts[i] = k + "=xxxxx"
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}

// secretParams are the store URL's query parameters that Redact hides.
var secretParams = map[string]bool{"password": true, "sslpassword": true}

// inTx runs fn in a transaction that the store itself ends, dropping
// the session, if the session sits idle in it for longer than ctx has
// left at its start (the store counts that from each statement's end).
// A replica stopped inside a transaction (SIGSTOP, a frozen VM, a long
// pause) keeps its connection open, so the row locks it took (the
// lease's, the operators' row) would otherwise block every other replica
// for as long as it stays stopped: no one could take its lease over once
// it expired. Past ctx's deadline the transaction is abandoned anyway,
// so a live replica loses nothing to the limit. A ctx without a deadline
// begins a plain transaction: every caller here gives one.
func inTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	var opts pgx.TxOptions
	if d, ok := ctx.Deadline(); ok {
		// At least a millisecond: 0 would switch the limit off.
		opts.BeginQuery = fmt.Sprintf("BEGIN; SET LOCAL idle_in_transaction_session_timeout = %d", max(time.Until(d).Milliseconds(), 1))
	}
	return pgx.BeginTxFunc(ctx, pool, opts, fn)
}

// migrate creates the tables (one replica at a time: a transaction's
// advisory lock), refuses a newer schema, and makes the cluster's epoch
// and secret and the service's rows once.
func migrate(ctx context.Context, pool *pgxpool.Pool, service string) (epoch int64, secret []byte, err error) {
	err = inTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7283392017)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, schema); err != nil {
			return err
		}
		var v int
		switch err := tx.QueryRow(ctx, `SELECT max(version) FROM brownout_schema HAVING count(*) > 0`).Scan(&v); {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO brownout_schema (version) VALUES ($1)`, SchemaVersion); err != nil {
				return err
			}
		case err != nil:
			return err
		case v > SchemaVersion:
			return fmt.Errorf("%w: version %d, this brownoutd writes %d: upgrade this brownoutd (every replica runs one version of the schema)", ErrNewerSchema, v, SchemaVersion)
		}
		var s [32]byte
		rand.Read(s[:])
		if _, err := tx.Exec(ctx, `INSERT INTO brownout_cluster (id, epoch, secret) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING`, time.Now().UnixNano(), s[:]); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT epoch, secret FROM brownout_cluster WHERE id = 1`).Scan(&epoch, &secret); err != nil {
			return err
		}
		for _, t := range []string{"brownout_lease", "brownout_published", "brownout_operator"} {
			if _, err := tx.Exec(ctx, `INSERT INTO `+t+` (service) VALUES ($1) ON CONFLICT (service) DO NOTHING`, service); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNewerSchema) {
		err = fmt.Errorf("cluster: setting up the store's tables: %w", err)
	}
	return epoch, secret, err
}

// published is the leader's last commit as a follower reads it.
type published struct {
	term       uint64
	holder     string
	generation uint64
	configHash string
	opsVersion uint64
}

// leaseRow is the lease as the database says it, with the time left on
// its clock.
type leaseRow struct {
	term      uint64
	holder    string
	since     time.Time
	remaining time.Duration
}

// opState is the operators' state in the store: the freeze and shadow,
// and the overrides in force with the time each has left on the
// database's clock.
type opState struct {
	version      uint64
	frozen       bool
	freezeReason string
	shadow       bool
	overrides    []opOverride
}

type opOverride struct {
	feature string
	level   float64
	left    time.Duration
	reason  string
}

// readOps reads the operators' state in tx.
func readOps(ctx context.Context, tx pgx.Tx, service string) (opState, error) {
	var o opState
	if err := tx.QueryRow(ctx, `SELECT version, frozen, freeze_reason, shadow FROM brownout_operator WHERE service = $1`, service).
		Scan(&o.version, &o.frozen, &o.freezeReason, &o.shadow); err != nil {
		return o, err
	}
	rows, err := tx.Query(ctx, `SELECT feature, level, reason, extract(epoch FROM until - now())::float8
		FROM brownout_override WHERE service = $1 AND until > now() ORDER BY feature`, service)
	if err != nil {
		return o, err
	}
	defer rows.Close()
	for rows.Next() {
		var ov opOverride
		var left float64
		if err := rows.Scan(&ov.feature, &ov.level, &ov.reason, &left); err != nil {
			return o, err
		}
		ov.left = time.Duration(left * float64(time.Second))
		o.overrides = append(o.overrides, ov)
	}
	return o, rows.Err()
}

// insertEvents numbers events in the service's sequence and inserts
// them, at the database's time. The sequence is a column of the
// service's operator row, so that its row lock, held to the commit,
// orders the commits as the numbers: a reader that has seen seq n never
// misses an event numbered under n that commits later.
func insertEvents(ctx context.Context, tx pgx.Tx, service string, es []api.Event) ([]api.Event, error) {
	if len(es) == 0 {
		return nil, nil
	}
	var last uint64
	var at time.Time
	if err := tx.QueryRow(ctx, `UPDATE brownout_operator SET event_seq = event_seq + $2 WHERE service = $1 RETURNING event_seq, now()`,
		service, len(es)).Scan(&last, &at); err != nil {
		return nil, err
	}
	out := make([]api.Event, len(es))
	for i, e := range es {
		e.Seq, e.Time = last-uint64(len(es)-1-i), at
		if _, err := tx.Exec(ctx, `INSERT INTO brownout_event (service, seq, at, kind, feature, who, what, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			service, e.Seq, e.Time, e.Kind, e.Feature, e.Who, e.What, e.Reason); err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// change records an operator's write in one transaction: the operators'
// state, its version, the audit event, and a notification to the
// replicas.
func change(ctx context.Context, pool *pgxpool.Pool, service string, c api.Change) (api.ChangeResult, error) {
	var res api.ChangeResult
	err := inTx(ctx, pool, func(tx pgx.Tx) error {
		switch c.Kind {
		case "override":
			if err := tx.QueryRow(ctx, `INSERT INTO brownout_override (service, feature, level, until, reason, who)
				VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, $6)
				ON CONFLICT (service, feature) DO UPDATE SET level = excluded.level, until = excluded.until, reason = excluded.reason, who = excluded.who
				RETURNING until`, service, c.Feature, c.Level, c.TTL.Seconds(), c.Reason, c.Who).Scan(&res.Until); err != nil {
				return err
			}
		case "release":
			tag, err := tx.Exec(ctx, `DELETE FROM brownout_override WHERE service = $1 AND feature = $2 AND until > now()`, service, c.Feature)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("cluster: release: %q is %w", c.Feature, dimmer.ErrNotPinned)
			}
		case "freeze":
			if _, err := tx.Exec(ctx, `UPDATE brownout_operator SET frozen = true, freeze_reason = $2 WHERE service = $1`, service, c.Reason); err != nil {
				return err
			}
		case "unfreeze":
			if _, err := tx.Exec(ctx, `UPDATE brownout_operator SET frozen = false, freeze_reason = '' WHERE service = $1`, service); err != nil {
				return err
			}
		case "shadow":
			if _, err := tx.Exec(ctx, `UPDATE brownout_operator SET shadow = $2 WHERE service = $1`, service, c.On); err != nil {
				return err
			}
		default:
			return fmt.Errorf("cluster: change of kind %q", c.Kind)
		}
		if err := tx.QueryRow(ctx, `UPDATE brownout_operator SET version = version + 1 WHERE service = $1 RETURNING version`, service).Scan(&res.Version); err != nil {
			return err
		}
		if _, err := insertEvents(ctx, tx, service, []api.Event{{Kind: c.Kind, Feature: c.Feature, Who: c.Who, What: c.What, Reason: c.Reason}}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, 'ops ' || $2)`, channel, service)
		return err
	})
	switch {
	case errors.Is(err, dimmer.ErrNotPinned):
		return res, err
	case err != nil:
		return res, fmt.Errorf("%w: %v", api.ErrStoreDown, err)
	}
	return res, nil
}

// importTimeout bounds an import's transactions: a few thousand rows at
// most (MaxFeatures overrides), seconds on a store that answers.
const importTimeout = 30 * time.Second

// Import writes an operators' state (a state file's, api.ReadStateFile)
// into the store at raw for service: its overrides still in force, its
// freeze and its shadow, as one change with an "import" event. What the
// store had is replaced.
func Import(ctx context.Context, raw, service string, st api.OperatorState, now time.Time) (int, error) {
	if service == "" {
		service = DefaultService
	}
	conn, err := Connect(ctx, raw, 1, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, importTimeout) // (a stopped import holds the operators' row no longer: see inTx)
	defer cancel()
	pool := conn.pool
	if _, _, err := migrate(ctx, pool, service); err != nil {
		return 0, err
	}
	n := 0
	err = inTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM brownout_override WHERE service = $1`, service); err != nil {
			return err
		}
		for _, o := range st.Overrides {
			left := o.Until.Sub(now)
			if left <= 0 {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO brownout_override (service, feature, level, until, reason, who)
				VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, 'import')`, service, o.Feature, o.Level, left.Seconds(), o.Reason); err != nil {
				return err
			}
			n++
		}
		if _, err := tx.Exec(ctx, `UPDATE brownout_operator SET frozen = $2, freeze_reason = $3, shadow = $4, version = version + 1 WHERE service = $1`,
			service, st.Frozen, st.FreezeReason, st.Shadow); err != nil {
			return err
		}
		what := fmt.Sprintf("operators' state imported: %d overrides, frozen %v, shadow %v", n, st.Frozen, st.Shadow)
		if _, err := insertEvents(ctx, tx, service, []api.Event{{Kind: "import", Who: "import", What: what}}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, 'ops ' || $2)`, channel, service)
		return err
	})
	return n, err
}

// marshalPoint and unmarshalPoint keep a history point as JSON.
func marshalPoint(p api.Point) ([]byte, error) { return json.Marshal(p) }

func unmarshalPoint(b []byte) (api.Point, error) {
	var p api.Point
	err := json.Unmarshal(b, &p)
	return p, err
}
