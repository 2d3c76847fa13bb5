package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/brownout/brownout/dimmer"
)

// scheduleLayouts are the accepted "from" forms; without an offset the
// entry's zone (default UTC) applies.
var scheduleLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04"}

// schedule reads the scheduled caps into d.
func schedule(fc *serviceFields, d *dimmer.Config, features map[string]bool, at func(path, format string, a ...any)) {
	for i, s := range fc.Schedule {
		p := fmt.Sprintf("schedule[%d]", i)
		if s.Feature != "" && !features[s.Feature] {
			at(p+".feature", "%q: not a feature", s.Feature)
		}
		loc := time.UTC
		if s.Zone != "" {
			l, err := time.LoadLocation(s.Zone)
			if err != nil {
				at(p+".zone", "%q: not a time zone (e.g. Asia/Dhaka)", s.Zone)
				continue
			}
			loc = l
		}
		var from time.Time
		var err error
		for _, layout := range scheduleLayouts {
			if from, err = time.ParseInLocation(layout, s.From, loc); err == nil {
				break
			}
		}
		if err != nil {
			at(p+".from", "%q: want a time such as 2026-11-11 23:59:30 (with zone:) or RFC 3339", s.From)
			continue
		}
		if s.For <= 0 {
			at(p+".for", "want a positive duration such as 10m")
			continue
		}
		if s.Max == nil || *s.Max < 0 || *s.Max > 1 || math.IsNaN(*s.Max) {
			at(p+".max", "want a level from 0 to 1")
			continue
		}
		if len(strings.TrimSpace(s.Reason)) > dimmer.MaxReason {
			at(p+".reason", "%d bytes long: at most %d", len(strings.TrimSpace(s.Reason)), dimmer.MaxReason)
			continue
		}
		reason := s.Reason
		if reason == "" {
			what := s.Feature
			if what == "" {
				what = "every feature"
			}
			reason = fmt.Sprintf("scheduled: %s at most %.0f%% from %s for %v", what, 100**s.Max, from.Format(time.RFC3339), time.Duration(s.For))
		}
		d.Schedule = append(d.Schedule, dimmer.Cap{Feature: s.Feature, From: from, For: time.Duration(s.For), Max: *s.Max, Reason: reason})
	}
}
