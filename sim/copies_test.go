package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPresetsAreCopies: the package's presets are functions returning fresh
// values, so that a caller changing what it got changes no later run.
func TestPresetsAreCopies(t *testing.T) {
	mix := BrownoutMix()
	mix[0].Share, mix[1].Optional = 0.9, 0
	assert.Equal(t, 0.3, BrownoutMix()[0].Share)
	assert.Equal(t, 0.4, BrownoutMix()[1].Optional)

	lab := BrownoutLab(Constant(150), Static(1))
	lab.Mix[0].Cost = 5
	assert.Equal(t, 0.6, BrownoutLab(Constant(150), Static(1)).Mix[0].Cost)

	step := BrownoutStep()
	step.Rates[1], step.At[1] = 1000, 0
	assert.Equal(t, []float64{80, 150, 80}, BrownoutStep().Rates)
	assert.Equal(t, 30*time.Second, BrownoutStep().At[1])

	feats := BrownoutFeatures()
	feats[0].Cost = 1
	assert.Equal(t, 0.25/0.6, BrownoutFeatures()[0].Cost)
	cfg := BrownoutConfig(BrownoutTarget)
	cfg.Features[1].Name = "x"
	assert.Equal(t, "reviews", BrownoutConfig(BrownoutTarget).Features[1].Name)

	sale := SaleMix()
	sale[2].Share = 0
	assert.Equal(t, 0.2, SaleMix()[2].Share)

	f := Formats()
	f[0] = "xml"
	assert.Equal(t, []string{"table", "csv", "json"}, Formats())

	seeds := Seeds()
	delete(seeds, "overload")
	seeds["codel"] = SeedSimulator{About: "changed"}
	assert.Len(t, Seeds(), 3)
	assert.NotEqual(t, "changed", Seeds()["codel"].About)

	names := ScenarioNames()
	names[0] = "changed"
	assert.NotContains(t, ScenarioNames(), "changed")

	assert.Equal(t, time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC), Epoch())
}
