// SPDX-License-Identifier: MulanPSL-2.0

package core_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
)

// problems is the value of mco_scheduler_plugin_problems_total{kind} of s.
func problems(t *testing.T, s *core.Shared, kind string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Metrics); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "mco_scheduler_plugin_problems_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no problems_total{kind=%q}", kind)
	return 0
}

// gauge is the value of an unlabelled gauge of s.
func gauge(t *testing.T, s *core.Shared, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Metrics); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

func freshState(nodes policy.NodeMap) policy.State {
	settings := policy.DefaultSettings()
	return policy.ReportState(&policy.Report{Updated: 100, Nodes: nodes}, 100, &settings, "", false)
}

func TestSensitivityReasons(t *testing.T) {
	s := core.New()
	settings := policy.DefaultSettings()
	basic := policy.ReportState(nil, 100, &settings, "", false)
	fresh := freshState(policy.NodeMap{})
	cases := []struct {
		name    string
		state   policy.State
		text    string
		present bool
		weights []policy.Weight
		reason  metrics.ScoreReason
	}{
		{"basic mode", basic, "cpu", true, nil, metrics.ScoreFallback},
		{"no annotation", fresh, "", false, nil, metrics.ScoreReport},
		{"valid", fresh, "cpu=2, io=1", true, []policy.Weight{{Name: "cpu", Weight: 1}, {Name: "io", Weight: 0.5}}, metrics.ScoreDimensions},
		{"invalid", fresh, "cpu=0", true, nil, metrics.ScoreInvalidHint},
		{"empty", fresh, "", true, nil, metrics.ScoreInvalidHint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sensitivity, reason := s.Sensitivity(&c.state, c.text, c.present)
			if reason != c.reason {
				t.Errorf("reason %v, want %v", reason, c.reason)
			}
			if c.weights == nil && sensitivity != nil {
				t.Errorf("sensitivity %+v, want none", sensitivity)
			}
			if c.weights != nil && (sensitivity == nil || !equalWeights(sensitivity.Weights, c.weights)) {
				t.Errorf("sensitivity %+v, want %v", sensitivity, c.weights)
			}
		})
	}
	// Only the two unreadable annotations are problems.
	if n := problems(t, s, "hint"); n != 2 {
		t.Errorf("%v hint problems, want 2", n)
	}
}

func equalWeights(a, b []policy.Weight) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSensitivityCached(t *testing.T) {
	s := core.New()
	state := freshState(policy.NodeMap{})
	first, _ := s.Sensitivity(&state, "memory,cache", true)
	again, _ := s.Sensitivity(&state, "memory,cache", true)
	if first == nil || first != again {
		t.Errorf("the same annotation read twice: %p, %p", first, again)
	}
	// An unreadable annotation is read once too, but each pod scored by it counts.
	for i := 0; i < 3; i++ {
		if _, reason := s.Sensitivity(&state, "Cpu", true); reason != metrics.ScoreInvalidHint {
			t.Fatalf("reason %v", reason)
		}
	}
	if n := problems(t, s, "hint"); n != 3 {
		t.Errorf("%v hint problems, want 3", n)
	}
}

func TestSensitivityConcurrent(t *testing.T) {
	s := core.New()
	state := freshState(policy.NodeMap{})
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 300; i++ {
				text := "cpu=" + string(rune('1'+(i+g)%9))
				if sens, reason := s.Sensitivity(&state, text, true); sens == nil || reason != metrics.ScoreDimensions {
					t.Errorf("%s: %+v %v", text, sens, reason)
				}
			}
		}(g)
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}

func TestArgumentsCountsProblems(t *testing.T) {
	s := core.New()
	parsed := s.Arguments(map[string]interface{}{"crStatusTTLSeconds": "soon", "bogus": 1, "crName": "east"})
	if parsed.CRName != "east" || parsed.Settings.TTLSeconds != 30 {
		t.Errorf("parsed %+v", parsed)
	}
	if n := problems(t, s, "argument"); n != 2 {
		t.Errorf("%v argument problems, want 2", n)
	}
	s.Arguments(nil)
	if n := problems(t, s, "argument"); n != 2 {
		t.Errorf("%v argument problems after good arguments, want 2", n)
	}
}

func TestLookWithoutSource(t *testing.T) {
	s := core.New()
	settings := policy.DefaultSettings()
	settings.TTLSeconds = 12
	view := s.Look(nil, settings, time.Now())
	if view.State.Fallback != policy.FallbackMissing || !view.State.BasicMode() ||
		view.State.Detail != "no report source (see the plugin's log)" {
		t.Errorf("state %+v", view.State)
	}
	settings.TTLSeconds = 99 // the view holds its own copy
	if view.Settings.TTLSeconds != 12 {
		t.Errorf("view settings %+v", view.Settings)
	}
	if v := gauge(t, s, "mco_extender_basic_mode"); v != 1 {
		t.Errorf("basic mode gauge %v after Look, want 1", v)
	}
}

func TestSourceWithoutConfiguration(t *testing.T) {
	s := core.New()
	if src := s.Source(nil, "cluster"); src != nil {
		t.Errorf("source %v without a client configuration", src)
	}
	if n := problems(t, s, "watch"); n != 1 {
		t.Errorf("%v watch problems, want 1", n)
	}
}

func TestStateBeforeAnyCycle(t *testing.T) {
	s := core.New()
	if v := gauge(t, s, "mco_extender_basic_mode"); v != 1 {
		t.Errorf("basic mode gauge %v before any cycle, want 1", v)
	}
	if v := gauge(t, s, "mco_scheduler_plugin_report_nodes"); v != 0 {
		t.Errorf("report nodes %v before any cycle, want 0", v)
	}
}
