package main

import (
	"bytes"
	"context"
	"flag"
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

// TestServeBrownoutdURLs: --brownoutd takes a base URL, or several
// replicas' separated by commas; an empty one, a bad one or a replica
// twice is a usage error naming the flag, before the shop starts.
func TestServeBrownoutdURLs(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:8080", "http://127.0.0.1:8080,", ",http://127.0.0.1:8080", "http://127.0.0.1:8080,http://127.0.0.1:8080/",
		"http://127.0.0.1:8080,ftp://127.0.0.1:21", "http://u:p@127.0.0.1:8080", "http://127.0.0.1:8080/?x=1", " , "} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"serve", "--brownoutd", bad}, &stdout, &stderr)
		var ue usageError
		if assert.ErrorAs(t, err, &ue, bad) {
			assert.Contains(t, ue.Error(), "--brownoutd", "the error names the flag")
		}
		assert.Empty(t, stdout.String(), "%q: nothing served", bad)
	}
}

// TestServeService: --service names a service of the daemon's; a bad
// name, or one without --brownoutd, is a usage error naming the flag,
// before the shop starts.
func TestServeService(t *testing.T) {
	for _, args := range [][]string{
		{"--brownoutd", "http://127.0.0.1:8080", "--service", "Shop"},
		{"--brownoutd", "http://127.0.0.1:8080", "--service", "shop/eu"},
		{"--brownoutd", "http://127.0.0.1:8080", "--service", "-shop"},
		{"--service", "shop"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"serve"}, args...), &stdout, &stderr)
		var ue usageError
		if assert.ErrorAs(t, err, &ue, "%v", args) {
			assert.Contains(t, ue.Error(), "--service", "the error names the flag")
		}
		assert.Empty(t, stdout.String(), "%v: nothing served", args)
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.NoError(t, run(context.Background(), []string{"version"}, &stdout, &stderr))
	assert.Regexp(t, `^shop-demo \S+.* go1\.\d+`, stdout.String())
	assert.Empty(t, stderr.String())
}

// TestHelpOnStdout: every command's --help goes to stdout and succeeds.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"sale", "--help"}, {"knee", "-h"}, {"deps", "--help"}} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, &stdout, &stderr)
		if err != nil {
			assert.ErrorIs(t, err, flag.ErrHelp, "%v", args)
		}
		assert.Contains(t, stdout.String(), "Usage", "%v", args)
		assert.Empty(t, stderr.String(), "%v", args)
	}
}

func TestServeLogFlags(t *testing.T) {
	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"serve"}, args...), &stdout, &stderr)
		var ue usageError
		if assert.ErrorAs(t, err, &ue, "%v", args) {
			assert.Contains(t, ue.Error(), args[0])
		}
	}
}
