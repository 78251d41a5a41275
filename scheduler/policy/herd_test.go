// SPDX-License-Identifier: MulanPSL-2.0

package policy_test

import (
	"math"
	"testing"

	"mco.many-core.io/scheduler/policy"
)

// herdState is a fresh report with a quiet node (no dimensions above 0), a node with cpu 40 and io
// 10, and a node without dimensions scoring 20.
func herdState() policy.State {
	return policy.State{Report: &policy.Report{Updated: 1000, Nodes: policy.NodeMap{
		"quiet": {Level: policy.LevelNone, Score: 0, Dimensions: []policy.Dimension{}},
		"busy":  {Level: policy.LevelLow, Score: 40, Dimensions: []policy.Dimension{{Name: "cpu", Score: 40}, {Name: "io", Score: 10}}},
		"flat":  {Level: policy.LevelLow, Score: 20},
		// combine: compound: cpu 50 and io 50 add up to 75.
		"compound": {Level: policy.LevelMedium, Score: 75, Dimensions: []policy.Dimension{{Name: "cpu", Score: 50}, {Name: "io", Score: 50}}},
		"gone":     {Level: policy.LevelUnknown, Score: 0},
	}}}
}

func recent(loads ...policy.Load) *policy.Recent {
	r := &policy.Recent{}
	for i, l := range loads {
		r.Add(l, 990+float64(i))
	}
	return r
}

var (
	cpuPod = policy.Load{Weights: []policy.Weight{{Name: "cpu", Weight: 1}}}
	ioPod  = policy.Load{Weights: []policy.Weight{{Name: "io", Weight: 1}}}
	anyPod = policy.Load{All: true}
)

func sens(t *testing.T, text string) *policy.Sensitivity {
	t.Helper()
	s, err := policy.ParseSensitivity(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGuardedScorePerDimension(t *testing.T) {
	state := herdState()
	s := policy.DefaultSettings() // 5 points a pod
	four := recent(cpuPod, cpuPod, cpuPod, cpuPod)
	for _, c := range []struct {
		name        string
		node        string
		sensitivity *policy.Sensitivity
		recent      *policy.Recent
		raw, score  float64
		dimension   string
	}{
		{"no placements", "quiet", nil, recent(), 100, 100, ""},
		{"cpu pods on a quiet node: its cpu estimate", "quiet", nil, four, 100, 80, "cpu"},
		{"cpu pods do not touch an io-sensitive pod", "quiet", sens(t, "io"), four, 100, 100, ""},
		{"compound node: one cpu pod raises the compound", "compound", nil, recent(cpuPod), 25, 22.5, "cpu"},
		{"compound node: an io-sensitive pod sees the io dimension", "compound", sens(t, "io"), recent(ioPod), 50, 45, "io"},
		{"cpu-sensitive pod sees them", "quiet", sens(t, "cpu"), four, 100, 80, "cpu"},
		{"half weight halves it", "quiet", sens(t, "io=2,cpu=1"), four, 100, 90, "cpu"},
		{"added to the reported dimension", "busy", nil, four, 60, 40, "cpu"},
		{"below the reported worst: no change", "busy", nil, recent(ioPod, ioPod), 60, 60, ""},
		{"io pods past the worst", "busy", nil, recent(ioPod, ioPod, ioPod, ioPod, ioPod, ioPod, ioPod), 60, 55, "io"},
		{"a pod of unknown load counts in every dimension", "busy", sens(t, "io"), recent(anyPod, anyPod), 90, 80, "io"},
		{"an entry without dimensions: its node score", "flat", nil, recent(anyPod, anyPod), 80, 70, policy.NodeDimension},
		{"an entry without dimensions, named loads", "flat", nil, four, 80, 60, "cpu"},
		{"never below 0", "quiet", nil, recent(cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod,
			cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod, cpuPod), 100, 0, "cpu"},
		{"unknown level keeps the neutral score", "gone", nil, four, 50, 50, ""},
		{"absent node keeps the neutral score", "nowhere", nil, four, 50, 50, ""},
	} {
		g := policy.GuardedScore(&state, c.node, &s, c.sensitivity, c.recent)
		if g.Raw != c.raw || math.Abs(g.Score-c.score) > 1e-9 || g.Dimension != c.dimension {
			t.Errorf("%s: got raw %v score %v dimension %q, want %v %v %q", c.name, g.Raw, g.Score, g.Dimension, c.raw, c.score, c.dimension)
		}
		if g.Discounted() != (c.dimension != "") {
			t.Errorf("%s: Discounted %v", c.name, g.Discounted())
		}
	}
}

func TestGuardOffIsRawScore(t *testing.T) {
	state := herdState()
	s := policy.DefaultSettings()
	s.Herd.Enabled = false
	for _, node := range []string{"quiet", "busy", "flat", "gone", "nowhere"} {
		for _, sensitivity := range []*policy.Sensitivity{nil, sens(t, "cpu"), sens(t, "io=1,cpu=3")} {
			g := policy.GuardedScore(&state, node, &s, sensitivity, recent(cpuPod, ioPod, anyPod))
			if raw := policy.RawScore(&state, node, &s, sensitivity); g.Score != raw || g.Raw != raw || g.Discounted() {
				t.Errorf("%s %v: guard off gave %+v, RawScore %v", node, sensitivity, g, raw)
			}
		}
	}
	basic := policy.State{}
	if g := policy.GuardedScore(&basic, "quiet", &s, nil, recent(cpuPod)); g.Score != s.UnknownScore || g.Discounted() {
		t.Errorf("basic mode: %+v", g)
	}
}

func TestHerdCounts(t *testing.T) {
	h := policy.DefaultHerdGuard() // settle 10 s, max age 60 s
	for _, c := range []struct {
		placed, sampled, now float64
		want                 bool
	}{
		{100, 95, 101, true},   // sampled before the placement
		{100, 105, 106, true},  // sampled after it, but too soon to show it
		{100, 110, 111, false}, // a sample settleSeconds later has it
		{100, 95, 160, true},   // the node's samples stopped: counted up to maxAgeSeconds
		{100, 95, 161, false},  // and not longer
		{100, 110, 101, true},  // a node clock 9 s ahead: its sample is taken as of now
		{100, 120, 110, false}, // settleSeconds by the scheduler's clock
	} {
		if got := h.Counts(c.placed, c.sampled, c.now); got != c.want {
			t.Errorf("placed %v sampled %v now %v: %v, want %v", c.placed, c.sampled, c.now, got, c.want)
		}
	}
	h.Enabled = false
	if h.Counts(100, 95, 101) {
		t.Error("a guard that is off counts nothing")
	}
}

func TestPodLoad(t *testing.T) {
	if l := policy.PodLoad(sens(t, "io=2,cpu"), true, true); len(l.Weights) != 2 || l.Weights[0] != (policy.Weight{Name: "io", Weight: 1}) || l.All {
		t.Errorf("a hint names the load: %+v", l)
	}
	if l := policy.PodLoad(nil, true, false); len(l.Weights) != 1 || l.Weights[0].Name != "cpu" || l.All {
		t.Errorf("cpu requests: %+v", l)
	}
	if l := policy.PodLoad(nil, true, true); len(l.Weights) != 2 || l.Weights[1].Name != "memory" {
		t.Errorf("cpu and memory requests: %+v", l)
	}
	if l := policy.PodLoad(nil, false, false); !l.All || len(l.Weights) != 0 {
		t.Errorf("nothing known: %+v", l)
	}
}
