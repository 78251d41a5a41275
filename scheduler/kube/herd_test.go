// SPDX-License-Identifier: MulanPSL-2.0

package kube

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/policy"
)

// burstPlugin is the plugin over a report of one quiet node and two Low nodes (cpu 20), all
// sampled before the burst.
func burstPlugin(t *testing.T, guard bool) (*Plugin, *events.FakeRecorder) {
	t.Helper()
	p, _ := plugin(t, false, func(s *policy.Settings) { s.Herd.Enabled = guard })
	settings := p.args.Settings
	low := func() *policy.Node {
		return &policy.Node{Level: policy.LevelLow, Score: 20, Dimensions: []policy.Dimension{{Name: "cpu", Score: 20}}}
	}
	report := &policy.Report{Updated: now - 3, Nodes: policy.NodeMap{
		"q": {Level: policy.LevelNone, Score: 0, Dimensions: []policy.Dimension{}, Sampled: now - 4}, "l1": low(), "l2": low(),
	}}
	state := policy.ReportState(report, now, &settings, "", false)
	p.look = func(policy.Settings) core.View { return core.View{State: state, Settings: &settings} }
	recorder := events.NewFakeRecorder(100)
	p.events = recorder
	return p, recorder
}

func cpuPod(i int) *v1.Pod {
	p := pod("", "")
	p.Name, p.UID = "burst-"+strconv.Itoa(i), types.UID("uid-"+strconv.Itoa(i))
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
	}}}
	return p
}

// schedule runs n pods' cycles (PreScore, Score, Reserve on the best node; ties by name) and
// counts the pods per node.
func schedule(t *testing.T, p *Plugin, n int) map[string]int {
	t.Helper()
	placed := map[string]int{}
	nodes := nodeInfos("l1", "l2", "q")
	for i := 0; i < n; i++ {
		pod := cpuPod(i)
		state := framework.NewCycleState()
		if status := p.PreScore(ctx, state, pod, nodes); !status.IsSuccess() {
			t.Fatalf("PreScore: %v", status)
		}
		best, bestScore := "", int64(-1)
		for _, n := range nodes {
			score, status := p.Score(ctx, state, pod, n)
			if !status.IsSuccess() {
				t.Fatal(status)
			}
			if score > bestScore {
				best, bestScore = n.Node().Name, score
			}
		}
		if status := p.Reserve(ctx, state, pod, best); !status.IsSuccess() {
			t.Fatal(status)
		}
		placed[best]++
	}
	return placed
}

func counter(t *testing.T, p *Plugin, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(p.shared.Metrics); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metric
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

func TestHerdGuardSpreadsABurst(t *testing.T) {
	p, recorder := burstPlugin(t, true)
	placed := schedule(t, p, 30)
	if mean := 10; placed["q"] > 2*mean || placed["l1"] == 0 || placed["l2"] == 0 {
		t.Errorf("with the guard: %v (mean %d)", placed, mean)
	}
	off, offRecorder := burstPlugin(t, false)
	if placed := schedule(t, off, 30); placed["q"] != 30 {
		t.Errorf("without the guard every pod goes to the quiet node: %v", placed)
	}
	if len(offRecorder.Events) != 0 || off.shared.Herd.Len() != 0 {
		t.Errorf("guard off: %d events, %d placements held", len(offRecorder.Events), off.shared.Herd.Len())
	}
	steered := counter(t, p, "mco_scheduler_plugin_herd_steered_total", map[string]string{"verb": "kube_prioritize", "dimension": "cpu"})
	if want := float64(placed["l1"] + placed["l2"]); steered != want {
		t.Errorf("steered_total %v, want %v (every pod not on q)", steered, want)
	}
	if counter(t, p, "mco_scheduler_plugin_herd_discounted_total", map[string]string{"verb": "kube_prioritize"}) == 0 {
		t.Error("no discounted node counted")
	}
	if len(recorder.Events) != int(steered) || steered == 0 {
		t.Fatalf("%d events for %v steered pods", len(recorder.Events), steered)
	}
	event := <-recorder.Events
	for _, want := range []string{"Normal " + HerdReason, "node q", "level None", "cpu", "placed on l"} {
		if !strings.Contains(event, want) {
			t.Errorf("event %q lacks %q", event, want)
		}
	}
}

func TestHerdGuardUnreserveForgets(t *testing.T) {
	p, _ := burstPlugin(t, true)
	schedule(t, p, 3)
	if p.shared.Herd.Len() != 3 {
		t.Fatalf("held %d", p.shared.Herd.Len())
	}
	for i := 0; i < 3; i++ {
		p.Unreserve(ctx, framework.NewCycleState(), cpuPod(i), "q")
	}
	if p.shared.Herd.Len() != 0 {
		t.Errorf("after Unreserve %d held", p.shared.Herd.Len())
	}
}

func TestHerdGuardNewSampleResets(t *testing.T) {
	p, _ := burstPlugin(t, true)
	schedule(t, p, 10)
	settings := p.args.Settings
	// q's next sample, settleSeconds after the burst, has the burst's pods in it.
	report := &policy.Report{Updated: now + 11, Nodes: policy.NodeMap{
		"q": {Level: policy.LevelNone, Score: 0, Dimensions: []policy.Dimension{}, Sampled: now + 11},
	}}
	state := policy.ReportState(report, now+12, &settings, "", false)
	view := core.View{State: state, Settings: &settings}
	if g, recent := p.shared.Guarded(&view, "q", nil, now+12); g.Discounted() || recent.Pods != 0 {
		t.Errorf("after a later sample: %+v %+v", g, recent)
	}
}

// A node whose clock is 9 s ahead of the analyzer's (which accepts its samples): its sample, dated
// settleSeconds after the burst, was taken before the report holding it was written (5 s after
// the burst), so 11 s after the burst it still counts.
func TestHerdGuardNodeClockAhead(t *testing.T) {
	p, _ := burstPlugin(t, true)
	placed := schedule(t, p, 10)
	settings := p.args.Settings
	report := &policy.Report{Updated: now + 5, Nodes: policy.NodeMap{
		"q": {Level: policy.LevelNone, Score: 0, Dimensions: []policy.Dimension{}, Sampled: now + 14},
	}}
	state := policy.ReportState(report, now+11, &settings, "", false)
	view := core.View{State: state, Settings: &settings}
	if g, recent := p.shared.Guarded(&view, "q", nil, now+11); !g.Discounted() || recent.Pods != placed["q"] {
		t.Errorf("a sample dated ahead hid the burst: %+v %+v", g, recent)
	}
}
