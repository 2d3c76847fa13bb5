package cluster

import "time"

const (
	// DefaultLease is a leader's lease on the database's clock. A leader
	// renews it at every tick (1 s by default), so three ticks let one
	// renewal fail — a slow commit, a database hiccup — without a change
	// of leader, while a leader that died is replaced within the lease's
	// remainder (at most DefaultLease) plus the follower's attempt: under
	// the 5 s the failover is held to. The lease is at least leaseTicks
	// ticks (Config.Lease).
	DefaultLease = 3 * time.Second
	// DefaultMargin is how long before its lease would expire a leader
	// stops publishing, counted on its own monotonic clock from before it
	// sent the renewal. It covers what may come between the leader's
	// check and its publication (a GC pause, the scheduler) and any
	// difference in rate between its clock and the database's: a leader
	// that paused for longer than that finds its lease over when it
	// wakes, and publishes nothing. A third of the lease leaves a renewal
	// a whole tick of slack.
	DefaultMargin = time.Second
	// leaseTicks is the fewest ticks a lease lasts: a leader renews at
	// every tick, and must survive one renewal that failed.
	leaseTicks = 3
	// attemptSlack is how long after a lease's expiry (as the database
	// said it) a follower tries to take it: a little later than expiry, so
	// that the database's clock has certainly passed it.
	attemptSlack = 20 * time.Millisecond
)

// lease is this replica's own view of its leadership. The database keeps
// the lease row — term, holder, expiry on the database's clock — and
// decides who holds it: a renewal or a publication is a statement that
// names the term and the holder (UPDATE … WHERE term = $t AND holder =
// $me) and changes nothing when another took over. What this replica
// adds is when to stop on its own clock: renewed at sent (before the
// renewal was sent, so before the database's now() of its transaction,
// which sets the expiry), the lease holds on the database until at least
// sent + length in real time; the replica publishes only until sent +
// length − margin, and so never after another replica may lead.
//
// The zero lease leads nothing. A lease is owned by the replica's loop:
// not safe for concurrent use.
type lease struct {
	term  uint64    // the term held, or last held; 0: never
	until time.Time // publish before it (monotonic); zero: not leading
}

// renewed records a renewal (or the acquisition) of term, committed, that
// was sent at sent.
func (l *lease) renewed(term uint64, sent time.Time, length, margin time.Duration) {
	l.term, l.until = term, sent.Add(length-margin)
}

// leads reports whether this replica may publish as the leader at now.
func (l *lease) leads(now time.Time) bool { return !l.until.IsZero() && now.Before(l.until) }

// lost records that the database refused a renewal: another replica
// holds the lease, or it expired.
func (l *lease) lost() { l.until = time.Time{} }

// deadline is when a renewal sent at sent must have committed for its
// publication to count: after it the replica could not publish anyway.
func deadline(sent time.Time, length, margin time.Duration) time.Time {
	return sent.Add(length - margin)
}

// attemptAt is when a follower should try to take a lease that the
// database said, at read (local time), would expire in remaining.
func attemptAt(read time.Time, remaining time.Duration) time.Time {
	return read.Add(max(remaining, 0) + attemptSlack)
}

// leaseLength is the lease for a tick: DefaultLease, or leaseTicks ticks
// if longer; the margin keeps the same share of it.
func leaseLength(tick, lease, margin time.Duration) (time.Duration, time.Duration) {
	if lease <= 0 {
		lease = DefaultLease
	}
	if margin <= 0 {
		margin = DefaultMargin * lease / DefaultLease
	}
	if min := leaseTicks * tick; lease < min {
		margin = margin * min / lease
		lease = min
	}
	return lease, margin
}
