// Package store is the data layer of the 11.11 flash-sale shop demo
// (cmd/shop-demo): a catalogue with stock, carts, orders and idempotency
// keys, on SQLite (modernc.org/sqlite, the embedded default) or
// PostgreSQL (pgx), through database/sql.
//
// [Open] takes a DSN — postgres:// or postgresql:// for PostgreSQL, else
// an SQLite file path — creates the tables if they do not exist (all
// named shop_*, so the database can hold other things: the
// fallback.Outbox shares it through [Store.DB]) and seeds the
// [Catalogue] into an empty database: 50 products, the first 5 flash
// deals with 100 units each.
//
// # One transaction
//
// [Store.Checkout] is the whole purchase in one transaction: claim the
// idempotency key, take the stock, charge (the caller's [PayFunc], which
// calls the payment gateway through its guard), write the order, queue
// its SMS (the caller's [EnqueueFunc], which calls
// fallback.Outbox.Enqueue with the same transaction), commit. Either all
// of it happens or none of it: a declined payment, a sold-out product or
// a failed enqueue leaves the stock as it was and no order and no
// message behind. The payment is the one step the database cannot undo:
// it runs after everything that can refuse the purchase (the key, the
// stock), and once it has succeeded the order is written even if the
// caller's context ends.
//
// # No oversell
//
// Stock is taken with one conditional statement per product,
//
//	UPDATE shop_products SET stock = stock - $qty WHERE id = $id AND stock >= $qty
//
// and a checkout whose statement matches no row fails with
// [ErrOutOfStock] and rolls back. The check and the decrement are one
// atomic step under the row's write lock, so concurrent checkouts cannot
// both see the last units: on PostgreSQL under READ COMMITTED the second
// UPDATE waits for the first transaction and re-evaluates its WHERE on
// the committed row; on SQLite writers are serialized — every writing
// transaction begins IMMEDIATE (the _txlock=immediate DSN parameter), so
// it holds the write lock from BEGIN and never fails to upgrade a read
// later, and within a process checkouts queue for one writer slot instead
// of polling the lock. A CHECK (stock >= 0) backs it up. Products are
// taken in id order, so two multi-item checkouts cannot deadlock.
// [Store.Stats] and [Stats.Check] verify the books: for every product,
// sold + stock = initial.
//
// The price of one transaction: the payment call runs while it is open.
// On PostgreSQL a checkout holds the locks of its products' rows while it
// pays, so checkouts of one product (a flash deal) take turns for the
// length of a payment; on SQLite every checkout takes turns with every
// other. The payment guard's timeout bounds that wait.
//
// # Idempotency
//
// A client that times out retries with the same [CheckoutRequest.IdempotencyKey].
// The key is looked up first: if a committed checkout used it, the retry
// gets that order back (created false) and pays nothing; a key used by
// another user, or for other items, is [ErrIdempotencyConflict]. Else the
// checkout claims the key — a row under a UNIQUE constraint, inserted
// before the stock is taken and before the payment. Concurrent retries
// with one key therefore make one order and one payment: on PostgreSQL
// the second INSERT waits for the first transaction and then fails with a
// unique violation, upon which the checkout rolls back and returns the
// order the first one committed; on SQLite the second finds the key at
// its lookup, as the first has committed by the time it gets the write
// lock. A checkout that failed (declined, sold out) rolled its key back,
// so a retry tries again.
//
// Before the payment, serialization failures, deadlocks and SQLite busy
// errors rerun the transaction (at most 5 times); after it, nothing is
// rerun: a checkout never calls pay twice.
//
// Order ids are generated in Go: "o-", the time in microseconds (14 hex
// digits), "-", 48 random bits (12 hex digits); they sort by creation.
package store
