package sqlq

import "testing"

func TestNumbered(t *testing.T) {
	if got := Numbered("UPDATE t SET a = ? WHERE id = ? AND b >= ?"); got != "UPDATE t SET a = $1 WHERE id = $2 AND b >= $3" {
		t.Fatalf("got %q", got)
	}
}
