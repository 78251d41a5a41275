// SPDX-License-Identifier: MulanPSL-2.0

// Package volcano is mco-plugin for the Volcano scheduler: a predicate that keeps pods off nodes
// under hard pressure (and Kata pods off nodes without Kata) and a node order that prefers quiet
// nodes, both read from the NodeInterferenceReport through an informer. Importing the package
// registers the plugin; the scheduler's ConfigMap enables it by name, in the second tier:
//
//	tiers:
//	- plugins: [...]
//	- plugins:
//	  - name: mco-plugin
//	    arguments: {crName: cluster, crStatusTTLSeconds: 30, fallbackWhenCROutdated: true}
//
// Herd guard (herdGuard): the session's event handlers record each task allocated or pipelined on
// its node (a deallocation forgets it), and at the open the tasks this process did not place are
// counted too (allocated, pipelined, binding, or bound recently); until the node's report has a sample taken
// after it, the node order lowers the node by what such pods add to the dimensions they load. A
// pod placed away from the node it would have scored best without the guard gets an Event
// (reason MCOHerdGuard) saying which node, dimension, level and placements, at the session's
// close and only when the session kept the placement (a gang job that did not fit gets none).
//
// Volcano builds a new plugin object every session; the informers, counters and parsed hints
// live in one core.Shared for the process. A session reads the report once, when it opens, and
// its functions only read what was frozen then (Volcano calls them from 16 goroutines).
package volcano

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
)

// Name is the plugin's name in the scheduler ConfigMap (Volcano looks functions up by it).
const Name = "mco-plugin"

var (
	sharedOnce sync.Once
	shared     *core.Shared
)

// Shared is the process's state, made (and its metrics registered) on first use.
func Shared() *core.Shared {
	sharedOnce.Do(func() {
		shared = core.New()
		registerMetrics(shared.Metrics)
	})
	return shared
}

func init() {
	framework.RegisterPluginBuilder(Name, New)
}

type plugin struct {
	shared *core.Shared
	args   args.Args
	// fns are the session's functions (nil before the open).
	fns *functions
}

// New builds the plugin for one session from the ConfigMap's arguments.
func New(arguments framework.Arguments) framework.Plugin {
	s := Shared()
	return &plugin{shared: s, args: s.Arguments(map[string]interface{}(arguments))}
}

func (p *plugin) Name() string { return Name }

func (p *plugin) OnSessionOpen(ssn *framework.Session) {
	src := p.shared.Source(ssn.ClientConfig(), p.args.CRName)
	opened := time.Now()
	view := p.shared.Look(src, p.args.Settings, opened)
	fns := &functions{shared: p.shared, view: view, now: core.Seconds(opened)}
	p.fns = fns
	ssn.AddPredicateFn(Name, fns.predicate)
	ssn.AddNodeOrderFn(Name, fns.nodeOrder)
	if p.args.Settings.Herd.Enabled {
		fns.events = eventRecorder(ssn.KubeClient())
		fns.inFlight(ssn.Nodes)
		ssn.AddEventHandler(&framework.EventHandler{AllocateFunc: fns.allocated, DeallocateFunc: fns.deallocated})
	}
}

var (
	recorderOnce sync.Once
	recorder     record.EventRecorder
)

// eventRecorder is the process's recorder of the herd guard's Events (nil without a client).
func eventRecorder(client kubernetes.Interface) record.EventRecorder {
	recorderOnce.Do(func() {
		if client == nil {
			return
		}
		broadcaster := record.NewBroadcaster()
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vc-scheduler"})
	})
	return recorder
}

// HerdReason is the reason of the herd guard's Events.
const HerdReason = "MCOHerdGuard"

// OnSessionClose tells the steered pods whose placement the session kept (see steered).
func (p *plugin) OnSessionClose(ssn *framework.Session) {
	if p.fns != nil {
		p.fns.steered(ssn.Jobs)
	}
}

// functions are one session's predicate and node order over the report as it was at the open.
type functions struct {
	shared *core.Shared
	view   core.View
	tasks  sync.Map // task UID -> *scoring: each task's hint read once a session
	// now is the session's open (seconds); events records the herd guard's Events (nil: none).
	now    float64
	events record.EventRecorder
	// steers are the tasks the guard steered, by UID, told at the session's close.
	steersMu sync.Mutex
	steers   map[api.TaskID]steer
}

// steer is a task allocated away from the node it would have scored best, and the Event's text.
type steer struct {
	job       api.JobID
	pod       *v1.Pod
	node      string
	dimension string
	message   string
}

type scoring struct {
	sensitivity *policy.Sensitivity
	reason      metrics.ScoreReason
	// steering follows the herd guard's effect on the task (nil: guard off).
	steering *core.Steering
}

func (f *functions) predicate(task *api.TaskInfo, node *api.NodeInfo) error {
	runtimeClass := ""
	if task.Pod != nil && task.Pod.Spec.RuntimeClassName != nil {
		runtimeClass = *task.Pod.Spec.RuntimeClassName
	}
	var labels map[string]string
	known := node.Node != nil
	if known {
		labels = node.Node.Labels
	}
	verdict := policy.FilterNode(&f.view.State, node.Name, labels, known, runtimeClass, f.view.Settings)
	f.shared.Metrics.Filter(metrics.VolcanoPredicate, verdict)
	if verdict.Passed {
		return nil
	}
	// Unresolvable: preemption cannot lower a node's interference, so it must not evict for it.
	return api.NewFitErrWithStatus(task, node, &api.Status{Code: api.UnschedulableAndUnresolvable, Reason: verdict.Reason, Plugin: Name})
}

func (f *functions) nodeOrder(task *api.TaskInfo, node *api.NodeInfo) (float64, error) {
	s := f.scoring(task)
	f.shared.Metrics.Score(metrics.VolcanoPrioritize, s.reason, 1)
	if s.steering == nil {
		return policy.VolcanoScore(&f.view.State, node.Name, f.view.Settings, s.sensitivity), nil
	}
	g := f.shared.SteeredScore(&f.view, node.Name, s.sensitivity, f.now, metrics.VolcanoPrioritize, s.steering)
	return policy.VolcanoScale(g.Score, f.view.Settings), nil
}

// allocated records a task allocated (or pipelined) on its node, and notes it when the guard placed
// it away from the node it would have scored best (steered tells it at the session's close).
func (f *functions) allocated(event *framework.Event) {
	task := event.Task
	if task == nil || task.NodeName == "" {
		return
	}
	s := f.scoring(task)
	if s.steering != nil {
		// The node as the task scored it: before the task itself is counted on it.
		chosen, _ := f.shared.Guarded(&f.view, task.NodeName, s.sensitivity, f.now)
		if st, steered := s.steering.Steered(task.NodeName, chosen); steered {
			f.steersMu.Lock()
			if f.steers == nil {
				f.steers = map[api.TaskID]steer{}
			}
			f.steers[task.UID] = steer{job: task.Job, pod: task.Pod, node: task.NodeName,
				dimension: st.Guarded.Dimension, message: st.Message(core.Seconds(time.Now()))}
			f.steersMu.Unlock()
		}
	}
	f.place(task, core.Seconds(time.Now()))
}

// steered counts the steered tasks the session kept and tells their pods (an Event, reason
// HerdReason). Volcano allocates a gang job's tasks in a statement it commits or discards once the
// job is placed whole, so a steer is kept only when its task is still allocated, binding or bound
// on the node it was steered to in jobs (the session's, at its close); the rest are dropped.
func (f *functions) steered(jobs map[api.JobID]*api.JobInfo) {
	f.steersMu.Lock()
	steers := f.steers
	f.steers = nil
	f.steersMu.Unlock()
	for uid, st := range steers {
		job := jobs[st.job]
		if job == nil {
			continue
		}
		task := job.Tasks[uid]
		if task == nil || task.NodeName != st.node {
			continue
		}
		switch task.Status {
		case api.Allocated, api.Binding, api.Bound:
		default:
			continue
		}
		f.shared.Metrics.Steered(metrics.VolcanoPrioritize, st.dimension)
		if f.events != nil && st.pod != nil {
			f.events.Event(st.pod, v1.EventTypeNormal, HerdReason, st.message)
		}
	}
}

// deallocated forgets a task whose allocation was undone.
func (f *functions) deallocated(event *framework.Event) {
	if event.Task != nil {
		f.shared.Herd.Remove(string(event.Task.UID))
	}
}

// inFlight counts the tasks on the session's nodes that the ledger does not have (placed before
// this process started, or by another scheduler): those Volcano holds as allocated, pipelined or
// binding as placed at the session's open, the bound and running ones as placed when their pod's
// PodScheduled condition turned true, if that is recent enough to count. It runs at every open
// over every task: the bound and running tasks too old to count (nearly all) are skipped before
// the ledger is touched, and the rest go to it under one lock.
func (f *functions) inFlight(nodes map[string]*api.NodeInfo) {
	h := &f.view.Settings.Herd
	var found []core.Placement
	for _, node := range nodes {
		for _, task := range node.Tasks {
			if task.NodeName == "" {
				continue
			}
			at := f.now
			switch task.Status {
			case api.Allocated, api.Pipelined, api.Binding:
			case api.Bound, api.Running:
				scheduled, ok := scheduledAt(task.Pod)
				if !ok || f.now-scheduled > h.MaxAgeSeconds {
					continue
				}
				at = scheduled
			default:
				continue
			}
			found = append(found, core.Placement{Node: task.NodeName, UID: string(task.UID), At: at, Load: f.load(task)})
		}
	}
	if h.Enabled {
		f.shared.Herd.PlaceUnknown(found, h.MaxAgeSeconds)
	}
}

// scheduledAt is when pod was bound to its node (its PodScheduled condition), seconds.
func scheduledAt(pod *v1.Pod) (float64, bool) {
	if pod == nil {
		return 0, false
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return core.Seconds(c.LastTransitionTime.Time), true
		}
	}
	return 0, false
}

// place records task on its node at at (seconds) with the load of its hint or requests.
func (f *functions) place(task *api.TaskInfo, at float64) {
	f.shared.Place(&f.view.Settings.Herd, task.NodeName, string(task.UID), f.load(task), at)
}

// load is what task loads: its hint's dimensions, else those it requests.
func (f *functions) load(task *api.TaskInfo) policy.Load {
	cpu, memory := false, false
	if task.Resreq != nil {
		cpu, memory = task.Resreq.MilliCPU > 0, task.Resreq.Memory > 0
	}
	return policy.PodLoad(f.scoring(task).sensitivity, cpu, memory)
}

func (f *functions) scoring(task *api.TaskInfo) *scoring {
	if found, ok := f.tasks.Load(task.UID); ok {
		return found.(*scoring)
	}
	text, present := "", false
	if task.Pod != nil {
		text, present = task.Pod.Annotations[policy.SensitiveToAnnotation]
	}
	s := &scoring{}
	s.sensitivity, s.reason = f.shared.Sensitivity(&f.view.State, text, present)
	if f.view.Settings.Herd.Enabled {
		s.steering = &core.Steering{}
	}
	found, _ := f.tasks.LoadOrStore(task.UID, s)
	return found.(*scoring)
}
