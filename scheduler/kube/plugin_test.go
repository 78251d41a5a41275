// SPDX-License-Identifier: MulanPSL-2.0

package kube

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/policy"
)

const now = 1_700_000_000.0

// reportNodes: "quiet" scores 30 (io 80, cpu 10), "busy" is under io pressure, "half" scores
// 12.5 and "odd" 13.5 (ties round to even), "dark" has no data.
func reportNodes() policy.NodeMap {
	io, _ := policy.SignalIndex("psiIoSomeAvg10")
	quiet := &policy.Node{Level: policy.LevelLow, Score: 30, Dimensions: []policy.Dimension{{Name: "cpu", Score: 10}, {Name: "io", Score: 80}}}
	quiet.SetSignal(io, 5)
	busy := &policy.Node{Level: policy.LevelHigh, Score: 90}
	busy.SetSignal(io, 35)
	return policy.NodeMap{
		"quiet": quiet, "busy": busy, "kata-1": quiet,
		"half": {Level: policy.LevelLow, Score: 12.5}, "odd": {Level: policy.LevelLow, Score: 13.5},
		"dark": {Level: policy.LevelUnknown},
	}
}

// plugin is the plugin over a fixed view of the report (basic mode: none), with its own counters;
// looks counts how often a cycle read the report.
func plugin(t *testing.T, basic bool, change func(*policy.Settings)) (p *Plugin, looks *int) {
	t.Helper()
	a := args.Defaults()
	if change != nil {
		change(&a.Settings)
	}
	var report *policy.Report
	if !basic {
		report = &policy.Report{Updated: now - 3, Nodes: reportNodes()}
	}
	settings := a.Settings
	state := policy.ReportState(report, now, &settings, "", false)
	if state.BasicMode() != basic {
		t.Fatalf("state %+v", state)
	}
	looks = new(int)
	p = &Plugin{shared: core.New(), args: a, clock: func() time.Time { return time.UnixMicro(int64(now * 1e6)) }}
	p.look = func(policy.Settings) core.View {
		*looks++
		return core.View{State: state, Settings: &settings}
	}
	return p, looks
}

func pod(runtimeClass, sensitiveTo string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	if runtimeClass != "" {
		p.Spec.RuntimeClassName = &runtimeClass
	}
	if sensitiveTo != "" {
		p.Annotations = map[string]string{policy.SensitiveToAnnotation: sensitiveTo}
	}
	return p
}

func nodeInfo(name string, labels map[string]string) fwk.NodeInfo {
	n := framework.NewNodeInfo()
	n.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	return n
}

func nodeInfos(names ...string) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(names))
	for i, name := range names {
		out[i] = nodeInfo(name, nil)
	}
	return out
}

var ctx = context.Background()

func TestPreFilter(t *testing.T) {
	noConstraints := func(s *policy.Settings) { s.HardConstraints = nil }
	cases := []struct {
		name         string
		basic        bool
		change       func(*policy.Settings)
		runtimeClass string
		skip         bool
	}{
		{"basic mode", true, nil, "", true},
		{"basic mode, Kata pod", true, nil, "kata-qemu", false},
		{"report in use", false, nil, "", false},
		{"report in use, no hard constraint", false, noConstraints, "", true},
		{"report in use, no hard constraint, Kata pod", false, noConstraints, "kata", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := plugin(t, c.basic, c.change)
			state := framework.NewCycleState()
			result, status := p.PreFilter(ctx, state, pod(c.runtimeClass, ""), nodeInfos("quiet", "busy"))
			if result != nil {
				t.Errorf("result %+v: the plugin narrows no node set", result)
			}
			_, readErr := state.Read(filterKey)
			if c.skip {
				if !status.IsSkip() || readErr == nil {
					t.Errorf("status %v, state written %v: want Skip and nothing written", status, readErr == nil)
				}
				return
			}
			if status != nil || readErr != nil {
				t.Errorf("status %v, state read: %v; want nil and the state written", status, readErr)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	kataLabels := map[string]string{policy.KataLabel: policy.KataLabelValue}
	cases := []struct {
		name         string
		basic        bool
		runtimeClass string
		node         fwk.NodeInfo
		reason       string // "": passes
	}{
		{"quiet node", false, "", nodeInfo("quiet", nil), ""},
		{"node under pressure", false, "", nodeInfo("busy", nil), "mco: node busy psiIoSomeAvg10=35 > threshold 20 (report 3s old)"},
		{"node without data", false, "", nodeInfo("dark", nil), ""},
		{"node not in the report", false, "", nodeInfo("new", nil), ""},
		{"Kata pod, Kata node", false, "kata-qemu", nodeInfo("kata-1", kataLabels), ""},
		{"Kata pod, node without the label", false, "kata-qemu", nodeInfo("quiet", nil),
			"mco: node quiet has no label katacontainers.io/kata-runtime=true required by runtimeClassName kata-qemu"},
		{"basic mode, Kata pod, node without the label", true, "kata-qemu", nodeInfo("busy", nil),
			"mco: node busy has no label katacontainers.io/kata-runtime=true required by runtimeClassName kata-qemu"},
		{"basic mode, Kata pod, Kata node under pressure", true, "kata-qemu", nodeInfo("busy", kataLabels), ""},
		{"no Node object", false, "kata-qemu", framework.NewNodeInfo(), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := plugin(t, c.basic, nil)
			state := framework.NewCycleState()
			pd := pod(c.runtimeClass, "")
			if _, status := p.PreFilter(ctx, state, pd, nil); status.IsSkip() {
				t.Fatalf("PreFilter skipped")
			}
			status := p.Filter(ctx, state, pd, c.node)
			if c.reason == "" {
				if !status.IsSuccess() {
					t.Errorf("rejected: %v", status)
				}
				return
			}
			if status.Code() != fwk.UnschedulableAndUnresolvable || status.Message() != c.reason {
				t.Errorf("status %v %q, want UnschedulableAndUnresolvable %q", status.Code(), status.Message(), c.reason)
			}
		})
	}
}

func TestCycleReadsTheReportOnce(t *testing.T) {
	p, looks := plugin(t, false, nil)
	state := framework.NewCycleState()
	pd := pod("", "io")
	nodes := nodeInfos("quiet", "busy", "dark")
	p.PreFilter(ctx, state, pd, nodes)
	for _, n := range nodes {
		p.Filter(ctx, state, pd, n)
	}
	if *looks != 1 {
		t.Errorf("filtering read the report %d times, want once", *looks)
	}
	p.PreScore(ctx, state, pd, nodes)
	for _, n := range nodes {
		p.Score(ctx, state, pd, n)
	}
	if *looks != 2 {
		t.Errorf("scoring read the report %d times, want once", *looks-1)
	}
}

func TestFilterWithoutPreFilter(t *testing.T) {
	// A framework may call Filter alone (e.g. preemption's dry runs on a copied state).
	p, _ := plugin(t, false, nil)
	status := p.Filter(ctx, framework.NewCycleState(), pod("", ""), nodeInfo("busy", nil))
	if status.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("status %v", status)
	}
}

func TestPreScoreBasicModeSkips(t *testing.T) {
	p, _ := plugin(t, true, nil)
	state := framework.NewCycleState()
	if status := p.PreScore(ctx, state, pod("", "io"), nodeInfos("quiet")); !status.IsSkip() {
		t.Errorf("status %v, want Skip", status)
	}
	if _, err := state.Read(scoreKey); err == nil {
		t.Error("state written in basic mode")
	}
}

func TestScore(t *testing.T) {
	cases := []struct {
		sensitiveTo string
		want        map[string]int64
	}{
		{"", map[string]int64{"quiet": 70, "busy": 10, "half": 88, "odd": 86, "dark": 50, "new": 50}},
		{"io", map[string]int64{"quiet": 20, "busy": 10, "half": 88, "dark": 50}},
		{"cpu=2,io=1", map[string]int64{"quiet": 60, "busy": 10}},
		{"not a hint!", map[string]int64{"quiet": 70, "busy": 10}},
	}
	for _, c := range cases {
		t.Run(c.sensitiveTo, func(t *testing.T) {
			p, _ := plugin(t, false, nil)
			state := framework.NewCycleState()
			pd := pod("", c.sensitiveTo)
			if status := p.PreScore(ctx, state, pd, nodeInfos("quiet")); status != nil {
				t.Fatalf("PreScore %v", status)
			}
			view := p.look(p.args.Settings)
			var sensitivity *policy.Sensitivity
			if c.sensitiveTo != "" {
				sensitivity, _ = policy.ParseSensitivity(c.sensitiveTo)
			}
			for name, want := range c.want {
				got, status := p.Score(ctx, state, pd, nodeInfo(name, nil))
				if status != nil || got != want {
					t.Errorf("%s: %d, %v; want %d", name, got, status, want)
				}
				if fs := policy.FrameworkScore(&view.State, name, view.Settings, sensitivity); got != fs {
					t.Errorf("%s: %d, FrameworkScore %d", name, got, fs)
				}
			}
			if got, status := p.Score(ctx, state, pd, framework.NewNodeInfo()); got != 0 || status != nil {
				t.Errorf("no Node object: %d, %v", got, status)
			}
		})
	}
}

func TestNormalizeScoreClamps(t *testing.T) {
	p, _ := plugin(t, false, nil)
	scores := framework.NodeScoreList{{Name: "a", Score: -5}, {Name: "b", Score: 0}, {Name: "c", Score: 37}, {Name: "d", Score: 100}, {Name: "e", Score: 150}}
	if status := p.ScoreExtensions().NormalizeScore(ctx, framework.NewCycleState(), pod("", ""), scores); status != nil {
		t.Fatal(status)
	}
	want := []int64{0, 0, 37, 100, 100}
	for i, s := range scores {
		if s.Score != want[i] {
			t.Errorf("%s: %d, want %d", s.Name, s.Score, want[i])
		}
	}
}

func TestName(t *testing.T) {
	p, _ := plugin(t, false, nil)
	if p.Name() != "mco-plugin" {
		t.Errorf("name %q", p.Name())
	}
}
