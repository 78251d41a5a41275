// SPDX-License-Identifier: MulanPSL-2.0

package volcano

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/policy"
)

const now = 1_700_000_000.0

// reportNodes: "quiet" scores 30 (io 80, cpu 10), "busy" is under io pressure, "dark" has no data.
func reportNodes() policy.NodeMap {
	io, _ := policy.SignalIndex("psiIoSomeAvg10")
	quiet := &policy.Node{Level: policy.LevelLow, Score: 30, Dimensions: []policy.Dimension{{Name: "cpu", Score: 10}, {Name: "io", Score: 80}}}
	quiet.SetSignal(io, 5)
	busy := &policy.Node{Level: policy.LevelHigh, Score: 90}
	busy.SetSignal(io, 35)
	dark := &policy.Node{Level: policy.LevelUnknown}
	dark.SetSignal(io, 99)
	return policy.NodeMap{"quiet": quiet, "busy": busy, "dark": dark, "kata-1": quiet}
}

// session is one session's functions over a fresh report (or basic mode), with its own counters.
func session(t *testing.T, basic bool, weight float64) *functions {
	t.Helper()
	settings := policy.DefaultSettings()
	settings.ScoreWeight = weight
	var report *policy.Report
	if !basic {
		report = &policy.Report{Updated: now, Nodes: reportNodes()}
	}
	state := policy.ReportState(report, now, &settings, "", false)
	if state.BasicMode() != basic {
		t.Fatalf("state %+v", state)
	}
	return &functions{shared: core.New(), view: core.View{State: state, Settings: &settings}}
}

func task(uid, runtimeClass, sensitiveTo string) *api.TaskInfo {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}}
	if runtimeClass != "" {
		pod.Spec.RuntimeClassName = &runtimeClass
	}
	if sensitiveTo != "" {
		pod.Annotations = map[string]string{policy.SensitiveToAnnotation: sensitiveTo}
	}
	return api.NewTaskInfo(pod)
}

func node(name string, labels map[string]string) *api.NodeInfo {
	return api.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// unlisted is a node Volcano knows by name only (its Node object not in the cache).
func unlisted(name string) *api.NodeInfo {
	n := api.NewNodeInfo(nil)
	n.Name = name
	return n
}

var kataLabels = map[string]string{policy.KataLabel: policy.KataLabelValue}

func TestPredicate(t *testing.T) {
	cases := []struct {
		name         string
		basic        bool
		runtimeClass string
		node         *api.NodeInfo
		reason       string // "": passes
	}{
		{"quiet node", false, "", node("quiet", nil), ""},
		{"node under pressure", false, "", node("busy", nil),
			"mco: node busy psiIoSomeAvg10=35 > threshold 20 (report 0s old)"},
		{"node without data", false, "", node("dark", nil), ""},
		{"node not in the report", false, "", node("elsewhere", nil), ""},
		{"Kata pod, node without the label", false, "kata-qemu", node("quiet", map[string]string{policy.KataLabel: "false"}),
			"mco: node quiet has no label katacontainers.io/kata-runtime=true required by runtimeClassName kata-qemu"},
		{"Kata pod, Kata node", false, "kata-qemu", node("kata-1", kataLabels), ""},
		{"Kata pod, labels unknown", false, "kata-qemu", unlisted("quiet"), ""},
		{"Kata pod, labels unknown, under pressure", false, "kata-qemu", unlisted("busy"),
			"mco: node busy psiIoSomeAvg10=35 > threshold 20 (report 0s old)"},
		{"other runtime class", false, "runc", node("quiet", nil), ""},
		{"basic mode, node under pressure", true, "", node("busy", nil), ""},
		{"basic mode, Kata pod, node without the label", true, "kata", node("busy", nil),
			"mco: node busy has no label katacontainers.io/kata-runtime=true required by runtimeClassName kata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := session(t, c.basic, 1)
			err := f.predicate(task("u1", c.runtimeClass, ""), c.node)
			if c.reason == "" {
				if err != nil {
					t.Errorf("rejected: %v", err)
				}
				return
			}
			var fe *api.FitError
			if !errors.As(err, &fe) {
				t.Fatalf("error %#v is no *api.FitError", err)
			}
			want := api.StatusSets{{Code: api.UnschedulableAndUnresolvable, Reason: c.reason, Plugin: Name}}
			if fe.NodeName != c.node.Name || !reflect.DeepEqual(fe.Status, want) {
				t.Errorf("fit error on %s: %+v, want %+v", fe.NodeName, fe.Status[0], want[0])
			}
			if !reflect.DeepEqual(fe.Reasons(), []string{c.reason}) {
				t.Errorf("reasons %q", fe.Reasons())
			}
			if !fe.Status.ContainsUnschedulableAndUnresolvable() {
				t.Error("preemption may evict for this node")
			}
			if !strings.Contains(fe.Error(), "default/p-u1") {
				t.Errorf("error %q does not name the task", fe.Error())
			}
		})
	}
}

func TestPredicateCounted(t *testing.T) {
	f := session(t, false, 1)
	kata := task("u1", "kata-clh", "")
	_ = f.predicate(kata, unlisted("quiet"))
	_ = f.predicate(kata, node("kata-1", kataLabels))
	_ = f.predicate(kata, node("quiet", nil))
	_ = f.predicate(task("u2", "", ""), node("busy", nil))
	_ = f.predicate(task("u2", "", ""), node("dark", nil))
	expected := `
# HELP mco_extender_decisions_total Filter/score decisions per node, by verb, result (pass, reject, score) and reason
# TYPE mco_extender_decisions_total counter
mco_extender_decisions_total{reason="constraint",result="reject",verb="volcano_predicate"} 1
mco_extender_decisions_total{reason="kata",result="reject",verb="volcano_predicate"} 1
mco_extender_decisions_total{reason="labels-unknown",result="pass",verb="volcano_predicate"} 1
mco_extender_decisions_total{reason="no-data",result="pass",verb="volcano_predicate"} 1
mco_extender_decisions_total{reason="ok",result="pass",verb="volcano_predicate"} 1
`
	if err := testutil.CollectAndCompare(f.shared.Metrics, strings.NewReader(expected), "mco_extender_decisions_total"); err != nil {
		t.Error(err)
	}
}

func TestNodeOrder(t *testing.T) {
	cases := []struct {
		name        string
		basic       bool
		weight      float64
		sensitiveTo string
		want        map[string]float64
	}{
		{"by node score", false, 1, "", map[string]float64{"quiet": 70, "busy": 10, "dark": 50, "elsewhere": 50}},
		{"weighted", false, 2, "", map[string]float64{"quiet": 140, "busy": 20, "dark": 100, "elsewhere": 100}},
		{"sensitive to io", false, 1, "io", map[string]float64{"quiet": 20, "busy": 10, "dark": 50}},
		{"sensitive to cpu", false, 1, "cpu", map[string]float64{"quiet": 90, "busy": 10}},
		{"unreadable hint: by node score", false, 1, "IO", map[string]float64{"quiet": 70, "busy": 10}},
		{"basic mode", true, 2, "io", map[string]float64{"quiet": 100, "busy": 100, "elsewhere": 100}},
		{"weight 0", false, 0, "", map[string]float64{"quiet": 0, "busy": 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := session(t, c.basic, c.weight)
			tk := task("u1", "", c.sensitiveTo)
			for name, want := range c.want {
				got, err := f.nodeOrder(tk, node(name, nil))
				if err != nil || got != want {
					t.Errorf("%s: %v, %v; want %v", name, got, err, want)
				}
			}
		})
	}
}

func TestNodeOrderIsVolcanoScore(t *testing.T) {
	for _, basic := range []bool{false, true} {
		for _, text := range []string{"", "io", "cpu=1,io=3", "memory", "?"} {
			f := session(t, basic, 1.5)
			tk := task("u-"+text, "", text)
			var sensitivity *policy.Sensitivity
			if text != "" {
				sensitivity, _ = f.shared.Sensitivity(&f.view.State, text, true)
			}
			for name := range reportNodes() {
				got, _ := f.nodeOrder(tk, node(name, nil))
				if want := policy.VolcanoScore(&f.view.State, name, f.view.Settings, sensitivity); got != want {
					t.Errorf("basic %v, %q, %s: %v, want %v", basic, text, name, got, want)
				}
			}
		}
	}
}

func TestNodeOrderReadsTheHintOncePerTask(t *testing.T) {
	f := session(t, false, 1)
	bad := task("u1", "", "io=-1")
	for _, name := range []string{"quiet", "busy", "dark"} {
		_, _ = f.nodeOrder(bad, node(name, nil))
	}
	_, _ = f.nodeOrder(task("u2", "", "io=-1"), node("quiet", nil))
	expected := `
# HELP mco_extender_decisions_total Filter/score decisions per node, by verb, result (pass, reject, score) and reason
# TYPE mco_extender_decisions_total counter
mco_extender_decisions_total{reason="invalid-hint",result="score",verb="volcano_prioritize"} 4
# HELP mco_scheduler_plugin_problems_total Report and argument problems, by kind (watch: list/watch errors; unreadable: a report object that cannot be decoded; shards: a generation not yet whole; argument: a plugin argument replaced by its default; hint: a sensitive-to annotation that cannot be read)
# TYPE mco_scheduler_plugin_problems_total counter
mco_scheduler_plugin_problems_total{kind="argument"} 0
mco_scheduler_plugin_problems_total{kind="hint"} 2
mco_scheduler_plugin_problems_total{kind="shards"} 0
mco_scheduler_plugin_problems_total{kind="unreadable"} 0
mco_scheduler_plugin_problems_total{kind="watch"} 0
`
	if err := testutil.CollectAndCompare(f.shared.Metrics, strings.NewReader(expected),
		"mco_extender_decisions_total", "mco_scheduler_plugin_problems_total"); err != nil {
		t.Error(err)
	}

	// Within a session the task keeps the weights read first, even if its pod changes.
	good := task("u3", "", "io")
	first, _ := f.nodeOrder(good, node("quiet", nil))
	good.Pod.Annotations[policy.SensitiveToAnnotation] = "cpu"
	if again, _ := f.nodeOrder(good, node("quiet", nil)); again != first || first != 20 {
		t.Errorf("scores %v then %v, want 20 twice", first, again)
	}
}

func TestSessionFunctionsConcurrent(t *testing.T) {
	// Volcano calls a session's functions from 16 goroutines.
	f := session(t, false, 1)
	tasks := []*api.TaskInfo{task("u1", "", "io"), task("u2", "kata", "cpu"), task("u3", "", "")}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				tk := tasks[(g+i)%len(tasks)]
				n := node([]string{"quiet", "busy", "kata-1"}[i%3], nil)
				_ = f.predicate(tk, n)
				_, _ = f.nodeOrder(tk, n)
			}
		}(g)
	}
	wg.Wait()
	if got, _ := f.nodeOrder(tasks[0], node("quiet", nil)); got != 20 {
		t.Errorf("io-sensitive score on quiet %v, want 20", got)
	}
}

func TestNewWithBadArguments(t *testing.T) {
	cases := []struct {
		name      string
		arguments framework.Arguments
		want      func(*args.Args)
	}{
		{"nil", nil, func(*args.Args) {}},
		{"wrong types", framework.Arguments{"crStatusTTLSeconds": "soon", "hardConstraints": []interface{}{1}, "scoreWeight": -1,
			"kataRuntimeClassPrefixes": map[interface{}]interface{}{1: 2}, "bogus": nil}, func(*args.Args) {}},
		{"as yaml.v2 gives them", framework.Arguments{"crName": "east",
			"hardConstraints": map[interface{}]interface{}{"psiCpuSomeAvg10Threshold": 50, "psiIoSomeAvg10": nil}},
			func(a *args.Args) {
				cpu, _ := policy.SignalIndex("psiCpuSomeAvg10")
				a.CRName, a.Settings.HardConstraints = "east", []policy.Constraint{{Signal: cpu, Threshold: 50}}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(c.arguments)
			if p.Name() != "mco-plugin" {
				t.Errorf("name %q", p.Name())
			}
			want := args.Defaults()
			c.want(&want)
			if got := p.(*plugin).args; !reflect.DeepEqual(got, want) {
				t.Errorf("args %+v, want %+v", got, want)
			}
		})
	}
	if Shared() != New(nil).(*plugin).shared {
		t.Error("sessions do not share the process's state")
	}
}
