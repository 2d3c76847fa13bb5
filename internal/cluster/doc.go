// Package cluster runs brownoutd as several replicas of one service over
// a PostgreSQL store (brownoutd serve --store postgres://…): one replica
// leads the control loop, every replica serves the API, and a replica
// that dies is replaced within the lease.
//
// # Model
//
// The store keeps, per service (DefaultService, "default", for a daemon
// of one; every table is keyed by service):
//
//   - the lease: a row with a term, a holder and an expiry on the
//     database's clock (brownout_lease);
//   - the leader's last commit: the control law's dimmer.Checkpoint — its
//     published state, its last step's readings and reason, its
//     integrator and its learned costs —, the term and the generation
//     (brownout_published), the tick's history point (brownout_history);
//   - the operators' state: overrides with their end on the database's
//     clock, freeze, shadow, and a version that every write bumps
//     (brownout_operator, brownout_override);
//   - the events, the operators' audit among them, numbered per service
//     (brownout_event);
//   - the cluster's boot epoch and stream-token secret (brownout_cluster),
//     so that ETags, stream ids and stream tokens are the cluster's, not a
//     process's: a failover is not a restart to clients. Each service
//     keys its API with a secret derived from it (Replica.Secret), so
//     that one service's stream tokens and shed seed tell nothing of
//     another's.
//
// Each replica has two controllers of the same configuration: the law,
// which only the leader steps, and the served controller behind the API
// (OFREP, /v1/state, the streams), which only ever adopts committed
// checkpoints (dimmer.Controller.AdoptAt). Every tick, every replica takes
// a snapshot from its own source (so that its windows are warm when it
// takes over; with push, apps push to every replica). Then:
//
//   - the leader, in one transaction: renews the lease (UPDATE … WHERE
//     term = $t AND holder = $me), catches up with the stored checkpoint
//     if it is not the one it committed last, applies the operators'
//     changes to the law when their version moved, steps the law, and
//     writes the checkpoint, the history point and the events; after the
//     commit, and only while its lease holds on its own clock, it adopts
//     the checkpoint into its served controller. A commit that fails
//     puts the law back to the last committed checkpoint: the law never
//     runs ahead of what the store holds.
//   - a follower reads the leader's commit (woken by LISTEN/NOTIFY, and at
//     every tick in case a notification was lost), adopts it into both its
//     controllers when its generation is not older than what it serves,
//     and keeps the new history points and events. When the lease's
//     expiry comes (the database says how far off it is), it tries to take
//     the lease: UPDATE … WHERE expires <= now(), which bumps the term.
//
// A daemon of several services connects once (Connect): one pool sized
// for its services and one LISTEN connection whose notifications go to
// each service's replica (Config.Conn); a replica opened without one
// connects on its own.
//
// Reads never touch the store: every replica answers from its served
// controller and its API's memory. Its /v1/stream says, every tick and
// first on connect, whether it is current (Info, api.ReplicaJSON): it
// leads, or the lease it last read holds — the leader it follows
// committed less than a lease ago. The apps' remote provider leaves a
// replica that gives no news for a lease: a stopped replica is left
// about when the others replace a stopped leader, so that an app is not
// in the dark longer than the failover. A write at any replica is a
// transaction on the store (the operators' state, its version, the audit
// event, a notification); the leader applies it at once on the
// notification (or at its next tick), and the write's answer waits until
// the replica it was sent to serves it.
//
// # Invariants
//
//   - A state is served only after it was committed under a term the
//     store still held at the commit, so two replicas never serve two
//     states of one generation; generations only grow, across leaders
//     too (a new leader continues from the stored checkpoint).
//   - A leader publishes only until sent + lease − margin on its own
//     monotonic clock, sent being taken before the renewal's transaction
//     began. The database's now() is the transaction's start, so the
//     stored expiry is at least sent + lease: a new leader can only take
//     over a margin after the old one stopped, however long the old one
//     paused (lease.go).
//   - A replica stopped inside a transaction holds its locks for a
//     bounded time, however long it stays stopped: each transaction tells
//     the store to drop a session that idles in it longer than what its
//     context had left at its start (inTx; a leader's commit: the lease
//     less the margin, counted from the last statement sent), so another
//     replica takes the lease over within about a lease of the stop. An
//     operator's write stopped so holds the operators' row for up to its
//     3 s: the leader misses a commit or two, and the levels are marked
//     stale meanwhile.
//   - An acknowledged write is committed: it survives any replica and the
//     database's restart. While the store cannot be reached, writes answer
//     503 and change nothing; reads go on answering the levels held; the
//     leader stops publishing when its lease would have expired, and
//     /v1/state says "stale".
//
// # Why a lease row and not an advisory lock
//
// A session advisory lock (pg_try_advisory_lock) is held by a database
// session, and a connection pool hides which session a statement runs
// on: the lock is taken on one pooled connection and the next statement
// may run on another, which does not hold it. Worse, the lock is lost
// silently when its session ends — the connection reset by the network,
// the pool recycling it, the database restarting — while the process goes
// on believing it leads, and nothing in its later statements tells it
// otherwise: two replicas then lead at once. A lease row makes leadership
// a fact every statement can check (the term in the WHERE clause of the
// leader's commit), whatever connection it runs on, and gives it an end
// on one clock, the database's, that the leader bounds from below on its
// own.
//
// # Configuration
//
// Each replica records the hash of its control law's configuration; the
// leader's is stored with its commit. A follower whose configuration
// differs logs it and every replica lists the mismatching replicas in
// /v1/state (cluster.config_mismatch) and brownout_cluster_config_mismatch.
// The leader's configuration wins: its law computes the levels every
// replica serves (by feature name; a feature only a follower has follows
// the adopted brightness on that follower's ladder).
//
// # Usage
//
//	rep, err := cluster.Open(ctx, cluster.Config{URL: url, Name: name, Dimmer: cfg, Served: ctl})
//	a, err := api.New(api.Config{Controller: ctl, Store: rep, Epoch: rep.Epoch(), Secret: rep.Secret(), Cluster: rep.Info, …})
//	err = rep.Run(ctx, a, src) // in place of a.Run(ctx, src)
package cluster
