package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatsCheck(t *testing.T) {
	assert.NoError(t, Stats{Products: map[int64]ProductStats{1: {100, 1, 99}, 2: {5, 5, 0}}}.Check())
	err := Stats{Products: map[int64]ProductStats{1: {100, 0, 101}, 2: {5, 5, 0}, 3: {5, -1, 6}, 4: {5, 4, 0}}}.Check()
	require.Error(t, err)
	assert.Equal(t, "store: product 1: initial 100, sold 101, stock 0\nstore: product 3: initial 5, sold 6, stock -1\nstore: product 4: initial 5, sold 0, stock 4", err.Error())
}
