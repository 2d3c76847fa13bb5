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
// # The charge between two transactions
//
// [Store.Checkout] buys a basket around the one step the database cannot
// undo, the charge (the caller's [Payer], which calls the payment gateway
// through its guard). Everything that can refuse the purchase comes
// before it: the request (user, quantities merged by product, per-order
// limits), the idempotency key (another user's or another basket's: 422
// in the shop, nothing charged), the products and a look at their stock.
// Then a short transaction claims the checkout — a row of shop_checkouts
// with the user, the basket, the amount, the order id to be and the
// gateway key — and commits; the charge is made with no transaction open
// (on SQLite the write lock is held for milliseconds, not for a call to
// the gateway); a second short transaction finishes the claim, takes the
// stock, writes the order and queues its SMS (the caller's
// [EnqueueFunc], which calls fallback.Outbox.Enqueue with the same
// transaction). If the stock ran out meanwhile the charge is voided and
// the claim marked failed; a declined charge leaves stock, orders and
// outbox as they were.
//
// The invariant: every order stands on exactly one live charge, every
// live charge backs exactly one order, and no voided charge backs any. A
// claim is charged under one gateway key (a digest of the user and the
// idempotency key, or of the user and the order without one), for one
// order id and amount, so a retry is answered by the gateway with the
// same charge; and a voided charge is never replayed (the Payer refuses
// it with [ErrChargeVoided]).
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
// # Idempotency, crashes and abandoned checkouts
//
// A client that times out retries with the same
// [CheckoutRequest.IdempotencyKey]. The key's claim answers it: finished,
// with its order (created false, nothing charged) or its failure again;
// claimed by a checkout still within its lease ([Lease], 10 s), by
// waiting for it (at most 2 s), then [ErrInProgress]. Concurrent
// checkouts with one key make one claim (the key is UNIQUE; the loser of
// the INSERT finds the winner's claim), so one order and one charge.
//
// Each claim has an owner — the checkout that claimed it, or the last to
// take it over — and every write to it names its owner, so that a former
// owner writes nothing. A claim whose lease ran out — its checkout
// crashed between the claim and the order — or was given back — its
// checkout failed unsure whether the gateway charged (a timeout), or the
// database failed after the charge — is taken over by the next retry
// with its key, which charges under the same gateway key (the
// gateway answers with the charge if it was made) and finishes the order:
// exactly once, never charged twice. If no retry comes within
// [AbandonAfter] (a minute), [Store.Reconcile] takes the claim over,
// cancels whatever was charged under its gateway key ([Payer].Cancel:
// the charge voided if made, the key refused from then on) and marks it
// failed, so that a late retry gets [ErrCancelled] and charges nothing.
// The shop runs Reconcile when it starts and every 10 s. A serialization
// failure, deadlock or SQLite busy error reruns the finishing transaction
// (at most 5 times); the charge is never asked for again but under its
// key.
//
// A database written by an older version, whose keys were in
// shop_idempotency, opens with those keys as finished claims.
//
// Order ids are generated in Go: "o-", the time in microseconds (14 hex
// digits), "-", 48 random bits (12 hex digits); they sort by the time
// their checkout claimed them.
package store
