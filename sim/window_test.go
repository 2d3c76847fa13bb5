package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Between counts users by the second they arrived and answers by the
// second they finished, like Summary does for the whole run.
func TestResultBetween(t *testing.T) {
	res := Run(Config{Seed: 7, Duration: 20 * time.Second, Load: Constant(50)})
	all := res.Between(0, 20)
	assert.InDelta(t, res.Summary.InTime, all.InTime, 1e-9, "the whole run agrees with the summary")
	assert.Equal(t, res.Summary.Good, all.Good)
	assert.Equal(t, res.Summary.P99, all.P99)

	users, inTime := 0, 0
	for _, s := range res.Seconds[5:10] {
		users += s.Users
		inTime += s.UsersInTime
	}
	w := res.Between(5, 10)
	assert.Positive(t, users)
	assert.InDelta(t, float64(inTime)/float64(users), w.InTime, 1e-9)
	assert.Zero(t, res.Between(30, 40).Good, "past the end: empty")

	over := Run(Config{Seed: 7, Duration: 20 * time.Second, Load: Constant(200)})
	assert.Less(t, over.Between(10, 20).InTime, 0.9, "at twice the capacity, unbounded: most users late")
}
