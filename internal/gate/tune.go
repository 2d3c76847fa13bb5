package gate

// SetGain is for the lab's exploration only.
func SetGain(g float64) { gain = g }
