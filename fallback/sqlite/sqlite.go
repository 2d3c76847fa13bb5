// Package sqlite opens the embedded SQLite database of a fallback.Outbox
// (modernc.org/sqlite, pure Go: no cgo). It is apart from package fallback
// so that only who opens an SQLite database links the driver.
package sqlite

import (
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite" // driver "sqlite"
)

// Open opens (creating) an SQLite database for an outbox: WAL journal, a
// 5 s busy timeout, synchronous NORMAL (durable across process crashes; a
// power loss may lose the last transactions).
func Open(path string) (*sql.DB, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("fallback: open sqlite %s: %w", path, err)
	}
	return db, nil
}
