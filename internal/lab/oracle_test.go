package lab

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableRoundTrips(t *testing.T) {
	rows := []Row{
		{Load: 90, Theta: 0.9, InTime: 0.99141, Optional: 0.8997, P99: 258 * time.Millisecond, Found: true},
		{Load: 150, InTime: 0.97, Optional: 0.0103, P99: 310 * time.Millisecond},
	}
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, rows))
	assert.Equal(t, "load,theta,in_time,optional,p99_ms,found\n90,0.90,0.99141,0.8997,258,true\n150,0.00,0.97000,0.0103,310,false\n", b.String())
	got, err := ReadTable(&b)
	require.NoError(t, err)
	assert.Equal(t, rows, got)
}

func TestReadTableRefusesWhatIsNoTable(t *testing.T) {
	for in, want := range map[string]string{
		"":           "want the header",
		"a,b\n1,2\n": "want the header",
		"load,theta,in_time,optional,p99_ms,found\nx,0,0,0,0,true\n": "line 2: load",
		"load,theta,in_time,optional,p99_ms,found\n90,0\n":           "wrong number of fields",
	} {
		_, err := ReadTable(strings.NewReader(in))
		assert.ErrorContains(t, err, want, "%q", in)
	}
}
