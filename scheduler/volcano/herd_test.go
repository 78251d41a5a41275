// SPDX-License-Identifier: MulanPSL-2.0

package volcano

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/policy"
)

// burstSession is one session over a report of one quiet node and two Low nodes (cpu 20).
func burstSession(t testing.TB, shared *core.Shared, guard bool) (*functions, *record.FakeRecorder) {
	t.Helper()
	settings := policy.DefaultSettings()
	settings.Herd.Enabled = guard
	low := func() *policy.Node {
		return &policy.Node{Level: policy.LevelLow, Score: 20, Dimensions: []policy.Dimension{{Name: "cpu", Score: 20}}}
	}
	report := &policy.Report{Updated: now, Nodes: policy.NodeMap{
		"q": {Level: policy.LevelNone, Score: 0, Dimensions: []policy.Dimension{}}, "l1": low(), "l2": low(),
	}}
	state := policy.ReportState(report, now, &settings, "", false)
	recorder := record.NewFakeRecorder(100)
	return &functions{shared: shared, view: core.View{State: state, Settings: &settings}, now: now, events: recorder}, recorder
}

func cpuTask(i int) *api.TaskInfo {
	t := task("burst-"+strconv.Itoa(i), "", "")
	t.Pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
	}}}
	return api.NewTaskInfo(t.Pod)
}

// allocate runs n tasks as allocate does: score every node, allocate on the best (ties by name).
func allocate(t *testing.T, f *functions, n int) map[string]int {
	t.Helper()
	placed, _ := allocateJob(t, f, n)
	return placed
}

// allocateJob is allocate with the tasks in one job, each Allocated (as the session holds them).
func allocateJob(t *testing.T, f *functions, n int) (map[string]int, *api.JobInfo) {
	t.Helper()
	job := api.NewJobInfo("default/gang")
	placed := map[string]int{}
	nodes := []*api.NodeInfo{node("l1", nil), node("l2", nil), node("q", nil)}
	for i := 0; i < n; i++ {
		tk := cpuTask(i)
		best, bestScore := "", -1.0
		for _, n := range nodes {
			score, err := f.nodeOrder(tk, n)
			if err != nil {
				t.Fatal(err)
			}
			if score > bestScore {
				best, bestScore = n.Name, score
			}
		}
		tk.NodeName, tk.Job = best, job.UID
		job.AddTaskInfo(tk)
		if err := job.UpdateTaskStatus(tk, api.Allocated); err != nil {
			t.Fatal(err)
		}
		f.allocated(&framework.Event{Task: tk})
		placed[best]++
	}
	return placed, job
}

func jobs(job *api.JobInfo) map[api.JobID]*api.JobInfo {
	return map[api.JobID]*api.JobInfo{job.UID: job}
}

func TestHerdGuardSpreadsABurst(t *testing.T) {
	f, recorder := burstSession(t, core.New(), true)
	placed, job := allocateJob(t, f, 30)
	if len(recorder.Events) != 0 {
		t.Fatalf("%d events before the session's close", len(recorder.Events))
	}
	f.steered(jobs(job))
	if mean := 10; placed["q"] > 2*mean || placed["l1"] == 0 || placed["l2"] == 0 {
		t.Errorf("with the guard: %v", placed)
	}
	steered := steeredTotal(t, f.shared)
	if want := float64(placed["l1"] + placed["l2"]); steered != want || len(recorder.Events) != int(want) {
		t.Fatalf("steered %v, %d events, want %v", steered, len(recorder.Events), want)
	}
	event := <-recorder.Events
	for _, want := range []string{"Normal " + HerdReason, "node q", "level None", "cpu", "placed on l"} {
		if !strings.Contains(event, want) {
			t.Errorf("event %q lacks %q", event, want)
		}
	}
	off, offRecorder := burstSession(t, core.New(), false)
	if placed := allocate(t, off, 30); placed["q"] != 30 || len(offRecorder.Events) != 0 || off.shared.Herd.Len() != 0 {
		t.Errorf("guard off: %v, %d events, %d held", placed, len(offRecorder.Events), off.shared.Herd.Len())
	}
}

// A gang job that does not fit: the statement is discarded (each task deallocated and Pending at
// the close), so its steered tasks get no Event and are not counted; kept ones are.
func TestHerdGuardTellsOnlyKeptPlacements(t *testing.T) {
	f, recorder := burstSession(t, core.New(), true)
	placed, job := allocateJob(t, f, 30)
	steered := placed["l1"] + placed["l2"]
	if steered < 2 {
		t.Fatalf("placed %v: too few steered tasks to test", placed)
	}
	kept := 0
	for _, tk := range job.Tasks {
		if tk.NodeName == "q" {
			continue
		}
		if kept == 0 { // one steered task committed (binding); the rest discarded
			kept++
			if err := job.UpdateTaskStatus(tk, api.Binding); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := job.UpdateTaskStatus(tk, api.Pending); err != nil {
			t.Fatal(err)
		}
		f.deallocated(&framework.Event{Task: tk})
	}
	f.steered(jobs(job))
	if len(recorder.Events) != 1 || steeredTotal(t, f.shared) != 1 {
		t.Errorf("%d events, steered %v; want 1 (the binding task)", len(recorder.Events), steeredTotal(t, f.shared))
	}
	f.steered(jobs(job))
	if len(recorder.Events) != 1 {
		t.Errorf("told again: %d events", len(recorder.Events))
	}

	g, gRecorder := burstSession(t, core.New(), true)
	_, gang := allocateJob(t, g, 30)
	for _, tk := range gang.Tasks {
		if err := gang.UpdateTaskStatus(tk, api.Pending); err != nil {
			t.Fatal(err)
		}
		g.deallocated(&framework.Event{Task: tk})
	}
	g.steered(jobs(gang))
	if len(gRecorder.Events) != 0 || steeredTotal(t, g.shared) != 0 || g.shared.Herd.Len() != 0 {
		t.Errorf("discarded job: %d events, steered %v, %d held", len(gRecorder.Events), steeredTotal(t, g.shared), g.shared.Herd.Len())
	}
}

func TestHerdGuardLaterSessionsAndDeallocation(t *testing.T) {
	shared := core.New()
	first, _ := burstSession(t, shared, true)
	allocate(t, first, 4) // all four on q
	second, _ := burstSession(t, shared, true)
	if score, _ := second.nodeOrder(cpuTask(99), node("q", nil)); score != 80 {
		t.Errorf("the next session sees the four placements on q: score %v, want 80", score)
	}
	for i := 0; i < 4; i++ {
		second.deallocated(&framework.Event{Task: cpuTask(i)})
	}
	third, _ := burstSession(t, shared, true)
	if score, _ := third.nodeOrder(cpuTask(99), node("q", nil)); score != 100 {
		t.Errorf("deallocated tasks are forgotten: score %v, want 100", score)
	}
}

func TestHerdGuardCountsTasksInFlight(t *testing.T) {
	f, _ := burstSession(t, core.New(), true)
	q := node("q", nil)
	scheduled := func(secondsAgo float64) []v1.PodCondition {
		at := metav1.NewTime(time.UnixMicro(int64((now - secondsAgo) * 1e6)))
		return []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: at}}
	}
	for i, c := range []struct {
		status     api.TaskStatus
		conditions []v1.PodCondition
	}{
		{api.Binding, nil},
		{api.Pipelined, nil},
		{api.Running, scheduled(5)},   // bound 5 s ago: counts
		{api.Bound, scheduled(3)},     // counts
		{api.Running, scheduled(600)}, // long ago: its node's samples have it
		{api.Running, nil},            // bind time unknown
	} {
		tk := cpuTask(i)
		tk.NodeName, tk.Status = "q", c.status
		tk.Pod.Status.Conditions = c.conditions
		q.Tasks[api.PodKey(tk.Pod)] = tk
	}
	f.inFlight(map[string]*api.NodeInfo{"q": q})
	if f.shared.Herd.Len() != 4 {
		t.Errorf("tasks held: %d, want 4 (binding, pipelined, and the two bound in the last minute)", f.shared.Herd.Len())
	}
	recent := f.shared.Herd.Recent("q", now-10, now, &f.view.Settings.Herd)
	if recent.Pods != 4 || recent.Oldest != now-5 {
		t.Errorf("counted %+v", recent)
	}
}

// steeredTotal is mco_scheduler_plugin_herd_steered_total{verb="volcano_prioritize",dimension="cpu"}.
func steeredTotal(t *testing.T, shared *core.Shared) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(shared.Metrics); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "mco_scheduler_plugin_herd_steered_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] == "volcano_prioritize" && labels["dimension"] == "cpu" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
