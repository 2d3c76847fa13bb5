package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/internal/cluster"
	"github.com/brownout/brownout/internal/service"
)

// Replicas (docs/brownoutd.md, "Running replicas"): with --store, the
// operators' state, the events and the leader's published state live in
// PostgreSQL, and brownoutd runs as one of several replicas of the
// service (package internal/cluster); without, as one daemon with its
// state dir.

// storeConnectTimeout bounds the first contact with the store at start:
// long enough for a database that is starting beside the daemon (a
// container's), short enough that a wrong URL fails the start visibly.
const storeConnectTimeout = 10 * time.Second

// checkStore checks a store URL's form (reaching it is Open's).
func checkStore(s string) error {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return fmt.Errorf("%s: want a postgres:// URL", cluster.Redact(s))
	}
	return nil
}

// openReplica opens the store when c has one, for service s (its rows:
// the one service's are cluster.DefaultService's), and sets acfg up for a
// replica: the store for the writes, the cluster's epoch and secret, what
// /v1/state says of the replicas. The replica uses conn, the daemon's
// connection to the store, when it is not nil; else its own. Without a
// store it returns nil.
func openReplica(ctx context.Context, c *config, s *serviceConfig, conn *cluster.Conn, ctl *dimmer.Controller, acfg *api.Config, log *slog.Logger, reg prometheus.Registerer) (*cluster.Replica, error) {
	if c.Store == "" {
		return nil, nil
	}
	rep, err := cluster.Open(ctx, cluster.Config{URL: c.Store, Conn: conn, Service: s.Name, ConnectTimeout: storeConnectTimeout, Name: replicaName(c.Listen), Dimmer: s.Dimmer, Served: ctl,
		Version: brownout.Version(), Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	acfg.Store, acfg.Epoch, acfg.Secret, acfg.Cluster = rep, rep.Epoch(), rep.Secret(), rep.Info
	if conn == nil {
		warnPool(log, rep.MaxConns())
	}
	return rep, nil
}

// warnPool says, at start, that the store's pool (pool_max_conns in its
// URL) is too small for a leader to renew its lease while a write
// waits on the store.
func warnPool(log *slog.Logger, n int) {
	if n < cluster.MinPool {
		log.Warn("brownoutd: the store's pool is smaller than a leader needs: a write that waits on the store (a locked row, a slow commit) holds a connection the leaders renew their leases on, and they may lose them; give pool_max_conns at least 3, or leave it out", "pool_max_conns", n, "at_least", cluster.MinPool)
	}
}

// replicaNote names the replica in an event it records in the store,
// which every replica of the service shows: " (replica NAME)", or ""
// without a store.
func replicaNote(rep *cluster.Replica) string {
	if rep == nil {
		return ""
	}
	return " (replica " + rep.Info().Replica + ")"
}

// replicaName is this replica's name among the others: the host's name
// and the port it listens on (BROWNOUTD_REPLICA overrides it).
func replicaName(listen string) string {
	if n := os.Getenv("BROWNOUTD_REPLICA"); n != "" {
		return n
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "brownoutd"
	}
	_, port, _ := net.SplitHostPort(listen)
	return host + ":" + port
}

// stateWhere says where the operators' state lives, for the start line.
func stateWhere(c *config, rep *cluster.Replica) string {
	if rep == nil {
		return c.StateDir
	}
	l, m := rep.Lease()
	return fmt.Sprintf("store %s, replica %s, lease %v (margin %v)", cluster.Redact(c.Store), replicaName(c.Listen), l, m)
}

// reconfigurable is what a reload reconfigures: the controller, or a
// replica's law and served controller together.
type reconfigurable interface {
	Config() dimmer.Config
	Reconfigure(dimmer.Config) error
}

func reconfigurer(ctl *dimmer.Controller, rep *cluster.Replica) reconfigurable {
	if rep == nil {
		return ctl
	}
	return replicaReconf{ctl, rep}
}

type replicaReconf struct {
	ctl *dimmer.Controller
	rep *cluster.Replica
}

func (r replicaReconf) Config() dimmer.Config               { return r.ctl.Config() }
func (r replicaReconf) Reconfigure(cfg dimmer.Config) error { return r.rep.Reconfigure(cfg) }

const importUsage = `Usage: brownoutd import-state --store postgres://… [--service NAME] FILE

Writes a state file (a daemon's operator.json, in its state dir) into the
store that replicas share: its overrides still in force, its freeze and its
shadow replace what the store had, with an "import" event. Run it once,
when moving a daemon to replicas, before or while they run: the leader
applies it within a tick.

A daemon of several services (services: in its file) keeps each service's
state in state_dir/services/NAME/operator.json: import each with
--service NAME. Without --service the file is the one service's (the
store's service "default"); a file under services/NAME/ then needs
--service, so that no service's overrides land on another's.

Flags:
`

// runImport is brownoutd import-state.
func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import-state", flag.ContinueOnError)
	store := fs.String("store", os.Getenv("BROWNOUTD_STORE"), "the store, a postgres:// URL (env BROWNOUTD_STORE)")
	svc := fs.String("service", "", "the service whose state FILE is, on a daemon of several (services:); default: the one service's, "+cluster.DefaultService)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), importUsage)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return usagef("import-state: want one state file (operator.json)")
	}
	if *store == "" {
		return usagef("import-state: --store is required")
	}
	if err := checkStore(*store); err != nil {
		return usagef("import-state: store %v", err)
	}
	name := *svc
	if name == "" {
		// A service's own state file, imported as the one service's, would
		// put its overrides on another service's features.
		if owner := stateFileService(fs.Arg(0)); owner != "" {
			return usagef("import-state: %s is service %s's state (state_dir/services/%s/): say --service %s, or --service %s to import it as the one service's", fs.Arg(0), owner, owner, owner, cluster.DefaultService)
		}
		name = cluster.DefaultService
	}
	if err := service.Check(name); err != nil {
		return usagef("import-state: --service: %v", err)
	}
	st, err := api.ReadStateFile(fs.Arg(0))
	if err != nil {
		return err
	}
	n, err := cluster.Import(ctx, *store, name, st, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "brownoutd: imported %s into %s, service %s: %d overrides in force, frozen %v, shadow %v\n", fs.Arg(0), cluster.Redact(*store), name, n, st.Frozen, st.Shadow)
	return nil
}

// stateFileService names the service whose state file path is when it
// is one of a daemon of several's (…/services/NAME/operator.json), else "".
func stateFileService(path string) string {
	dir := filepath.Dir(filepath.Clean(path))
	if filepath.Base(filepath.Dir(dir)) != "services" {
		return ""
	}
	if name := filepath.Base(dir); service.Check(name) == nil {
		return name
	}
	return ""
}
