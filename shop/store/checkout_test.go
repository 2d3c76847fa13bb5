package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	items, canon, err := normalize(CheckoutRequest{User: "u", Items: []Item{{9, 1}, {4, 1}, {4, 2}}})
	require.NoError(t, err)
	assert.Equal(t, []Item{{4, 3}, {9, 1}}, items)
	assert.Equal(t, "4x3,9x1", canon)
	in := []Item{{2, 1}, {1, 1}}
	_, _, err = normalize(CheckoutRequest{User: "u", Items: in})
	require.NoError(t, err)
	assert.Equal(t, []Item{{2, 1}, {1, 1}}, in, "the caller's slice is not changed")
}
