package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestServeTrustedProxies: --trusted-proxies takes addresses and CIDR
// prefixes; anything else is a usage error naming the flag, before the
// shop starts.
func TestServeTrustedProxies(t *testing.T) {
	for _, bad := range []string{"localhost", "10.0.0.0/33", "127.0.0.1,nope", "fe80::1%eth0"} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"serve", "--trusted-proxies", bad}, &stdout, &stderr)
		var ue usageError
		if assert.ErrorAs(t, err, &ue, bad) {
			assert.Contains(t, ue.Error(), "--trusted-proxies", "the error names the flag")
		}
		assert.Empty(t, stdout.String(), "%q: nothing served", bad)
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.NoError(t, run(context.Background(), []string{"version"}, &stdout, &stderr))
	assert.Regexp(t, `^shop-demo \S+.* go1\.\d+`, stdout.String())
	assert.Empty(t, stderr.String())
}
