// SPDX-License-Identifier: MulanPSL-2.0

package core

import (
	"strconv"
	"testing"

	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
)

func TestHintCacheBounded(t *testing.T) {
	s := New()
	settings := policy.DefaultSettings()
	state := policy.ReportState(&policy.Report{Updated: 1, Nodes: policy.NodeMap{}}, 1, &settings, "", false)
	most := 0
	for i := 0; i < 1000; i++ {
		text := "d" + strconv.Itoa(i) // a stranger's annotations: each one new
		if i%2 == 1 {
			text = "D" + strconv.Itoa(i) // unreadable ones are kept too
		}
		s.Sensitivity(&state, text, true)
		s.hintsMu.RLock()
		most = max(most, len(s.hints))
		s.hintsMu.RUnlock()
	}
	if most != 256 {
		t.Errorf("the cache held up to %d hints, want 256", most)
	}
	if sens, reason := s.Sensitivity(&state, "d0", true); reason != metrics.ScoreDimensions || sens.Weights[0].Name != "d0" {
		t.Errorf("after the cache started afresh: %+v %v", sens, reason)
	}
}
