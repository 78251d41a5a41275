// SPDX-License-Identifier: MulanPSL-2.0

package metrics_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
)

func registered(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	m := metrics.New(time.Hour)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func compare(t *testing.T, reg *prometheus.Registry, expected string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}
}

const problemsHelp = `# HELP mco_scheduler_plugin_problems_total Report and argument problems, by kind (watch: list/watch errors; unreadable: a report object that cannot be decoded; shards: a generation not yet whole; argument: a plugin argument replaced by its default; hint: a sensitive-to annotation that cannot be read)
# TYPE mco_scheduler_plugin_problems_total counter
`

func TestDecisionsAndProblems(t *testing.T) {
	m, reg := registered(t)
	m.Filter(metrics.VolcanoPredicate, policy.Verdict{Passed: true, Rule: policy.RuleOK})
	m.Filters(metrics.VolcanoPredicate, policy.Verdict{Passed: false, Rule: policy.RuleConstraint}, 3)
	m.Filters(metrics.VolcanoPredicate, policy.Verdict{Passed: false, Rule: policy.RuleConstraint}, 2)
	m.Filter(metrics.KubeFilter, policy.Verdict{Passed: false, Rule: policy.RuleKata})
	m.Filters(metrics.KubeFilter, policy.Verdict{Passed: true, Rule: policy.RuleLabelsUnknown}, 4)
	m.Score(metrics.VolcanoPrioritize, metrics.ScoreDimensions, 5)
	m.Score(metrics.KubePrioritize, metrics.ScoreFallback, 2)
	m.Score(metrics.KubePrioritize, metrics.ScoreInvalidHint, 1)
	m.Problem("watch", "connection refused")
	m.Problem("watch", "connection refused")
	m.Problem("hint", "bad annotation")
	m.Problem("no-such-kind", "counted nowhere")

	compare(t, reg, `
# HELP mco_extender_decisions_total Filter/score decisions per node, by verb, result (pass, reject, score) and reason
# TYPE mco_extender_decisions_total counter
mco_extender_decisions_total{reason="constraint",result="reject",verb="volcano_predicate"} 5
mco_extender_decisions_total{reason="ok",result="pass",verb="volcano_predicate"} 1
mco_extender_decisions_total{reason="kata",result="reject",verb="kube_filter"} 1
mco_extender_decisions_total{reason="labels-unknown",result="pass",verb="kube_filter"} 4
mco_extender_decisions_total{reason="dimensions",result="score",verb="volcano_prioritize"} 5
mco_extender_decisions_total{reason="fallback",result="score",verb="kube_prioritize"} 2
mco_extender_decisions_total{reason="invalid-hint",result="score",verb="kube_prioritize"} 1
`+problemsHelp+`mco_scheduler_plugin_problems_total{kind="argument"} 0
mco_scheduler_plugin_problems_total{kind="hint"} 1
mco_scheduler_plugin_problems_total{kind="shards"} 0
mco_scheduler_plugin_problems_total{kind="unreadable"} 0
mco_scheduler_plugin_problems_total{kind="watch"} 2
`, "mco_extender_decisions_total", "mco_scheduler_plugin_problems_total")
}

func TestNoStateBeforeSetState(t *testing.T) {
	_, reg := registered(t)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		// Counters are exported from the start (at 0); the state gauges wait for a state.
		if name := f.GetName(); name != "mco_scheduler_plugin_problems_total" && name != "mco_scheduler_plugin_herd_discounted_total" {
			t.Errorf("%s exported before any state is known", f.GetName())
		}
	}
}

const stateHelp = `# HELP mco_extender_basic_mode 1 when the plugin runs in basic mode (fallback: every node passes)
# TYPE mco_extender_basic_mode gauge
mco_extender_basic_mode %s
# HELP mco_extender_fallback 1 for the reason basic mode is on (all 0 while the report is used)
# TYPE mco_extender_fallback gauge
mco_extender_fallback{reason="future"} %s
mco_extender_fallback{reason="missing"} %s
mco_extender_fallback{reason="stale"} %s
mco_extender_fallback{reason="unreadable"} %s
# HELP mco_extender_report_age_seconds Age of the report in use or last seen (NaN: none)
# TYPE mco_extender_report_age_seconds gauge
mco_extender_report_age_seconds %s
# HELP mco_extender_report_outdated_in_use 1 when an outdated report is used because fallbackWhenCROutdated is false
# TYPE mco_extender_report_outdated_in_use gauge
mco_extender_report_outdated_in_use %s
# HELP mco_scheduler_plugin_report_nodes Entries in the report in use (0 in basic mode)
# TYPE mco_scheduler_plugin_report_nodes gauge
mco_scheduler_plugin_report_nodes %s
`

func TestState(t *testing.T) {
	settings := policy.DefaultSettings()
	outdated := settings
	outdated.FallbackWhenOutdated = false
	nodes := policy.NodeMap{"a": {}, "b": {}, "c": {}}
	const now = 1000.0
	cases := []struct {
		name  string
		state policy.State
		nodes int
		want  []interface{} // basic, future, missing, stale, unreadable, age, outdated, nodes
	}{
		{"no report", policy.ReportState(nil, now, &settings, "", false), 0,
			[]interface{}{"1", "0", "1", "0", "0", "NaN", "0", "0"}},
		{"unreadable", policy.ReportState(nil, now, &settings, "bad", true), 0,
			[]interface{}{"1", "0", "0", "0", "1", "NaN", "0", "0"}},
		{"stale", policy.ReportState(&policy.Report{Updated: now - 45, Nodes: nodes}, now, &settings, "", false), 0,
			[]interface{}{"1", "0", "0", "1", "0", "45", "0", "0"}},
		{"future", policy.ReportState(&policy.Report{Updated: now + 60, Nodes: nodes}, now, &settings, "", false), 0,
			[]interface{}{"1", "1", "0", "0", "0", "-60", "0", "0"}},
		{"fresh", policy.ReportState(&policy.Report{Updated: now - 2.5, Nodes: nodes}, now, &settings, "", false), 3,
			[]interface{}{"0", "0", "0", "0", "0", "2.5", "0", "3"}},
		{"outdated in use", policy.ReportState(&policy.Report{Updated: now - 45, Nodes: nodes}, now, &outdated, "", false), 3,
			[]interface{}{"0", "0", "0", "0", "0", "45", "1", "3"}},
	}
	m, reg := registered(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m.SetState(func() (policy.State, int) { return c.state, c.nodes })
			compare(t, reg, fmt.Sprintf(stateHelp, c.want...),
				"mco_extender_basic_mode", "mco_extender_fallback", "mco_extender_report_age_seconds",
				"mco_extender_report_outdated_in_use", "mco_scheduler_plugin_report_nodes")
		})
	}
}

func TestLint(t *testing.T) {
	m, _ := registered(t)
	m.Filter(metrics.KubeFilter, policy.Verdict{Passed: true, Rule: policy.RuleOK})
	m.Score(metrics.KubePrioritize, metrics.ScoreReport, 1)
	m.Problem("argument", "bad")
	settings := policy.DefaultSettings()
	m.SetState(func() (policy.State, int) { return policy.ReportState(nil, 0, &settings, "", false), 0 })
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestConcurrentCounting(t *testing.T) {
	m, reg := registered(t)
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 1000; i++ {
				m.Filter(metrics.VolcanoPredicate, policy.Verdict{Passed: true, Rule: policy.RuleOK})
				m.Problem("shards", "incomplete")
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	compare(t, reg, `
# HELP mco_extender_decisions_total Filter/score decisions per node, by verb, result (pass, reject, score) and reason
# TYPE mco_extender_decisions_total counter
mco_extender_decisions_total{reason="ok",result="pass",verb="volcano_predicate"} 8000
`, "mco_extender_decisions_total")
	compare(t, reg, problemsHelp+`mco_scheduler_plugin_problems_total{kind="argument"} 0
mco_scheduler_plugin_problems_total{kind="hint"} 0
mco_scheduler_plugin_problems_total{kind="shards"} 8000
mco_scheduler_plugin_problems_total{kind="unreadable"} 0
mco_scheduler_plugin_problems_total{kind="watch"} 0
`, "mco_scheduler_plugin_problems_total")
}

func TestHerdCounters(t *testing.T) {
	m, _ := registered(t)
	m.Discounted(metrics.KubePrioritize, 3)
	m.Steered(metrics.VolcanoPrioritize, "cpu")
	m.Steered(metrics.VolcanoPrioritize, "cpu")
	for i := 0; i < 40; i++ { // dimension names come from the report: the label values stay bounded
		m.Steered(metrics.KubePrioritize, "dim"+strconv.Itoa(i))
	}
	held := 7
	m.SetHeld(func() int { return held })
	const want = `# HELP mco_scheduler_plugin_herd_discounted_total Node scores the herd guard lowered for pods placed on the node since its report sample, by verb
# TYPE mco_scheduler_plugin_herd_discounted_total counter
mco_scheduler_plugin_herd_discounted_total{verb="kube_prioritize"} 3
mco_scheduler_plugin_herd_discounted_total{verb="volcano_prioritize"} 0
# HELP mco_scheduler_plugin_herd_placements Recent placements the herd guard holds (counted against their nodes until a later sample)
# TYPE mco_scheduler_plugin_herd_placements gauge
mco_scheduler_plugin_herd_placements 7
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "mco_scheduler_plugin_herd_discounted_total", "mco_scheduler_plugin_herd_placements"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "mco_scheduler_plugin_herd_steered_total"); n != 33 {
		t.Errorf("steered series %d, want 32 and one \"other\"", n)
	}
}
