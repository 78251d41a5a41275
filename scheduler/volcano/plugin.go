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
// Volcano builds a new plugin object every session; the informers, counters and parsed hints
// live in one core.Shared for the process. A session reads the report once, when it opens, and
// its functions only read what was frozen then (Volcano calls them from 16 goroutines).
package volcano

import (
	"sync"
	"time"

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
}

// New builds the plugin for one session from the ConfigMap's arguments.
func New(arguments framework.Arguments) framework.Plugin {
	s := Shared()
	return &plugin{shared: s, args: s.Arguments(map[string]interface{}(arguments))}
}

func (p *plugin) Name() string { return Name }

func (p *plugin) OnSessionOpen(ssn *framework.Session) {
	src := p.shared.Source(ssn.ClientConfig(), p.args.CRName)
	view := p.shared.Look(src, p.args.Settings, time.Now())
	fns := &functions{shared: p.shared, view: view}
	ssn.AddPredicateFn(Name, fns.predicate)
	ssn.AddNodeOrderFn(Name, fns.nodeOrder)
}

func (p *plugin) OnSessionClose(*framework.Session) {}

// functions are one session's predicate and node order over the report as it was at the open.
type functions struct {
	shared *core.Shared
	view   core.View
	tasks  sync.Map // task UID -> *scoring: each task's hint read once a session
}

type scoring struct {
	sensitivity *policy.Sensitivity
	reason      metrics.ScoreReason
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
	return policy.VolcanoScore(&f.view.State, node.Name, f.view.Settings, s.sensitivity), nil
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
	found, _ := f.tasks.LoadOrStore(task.UID, s)
	return found.(*scoring)
}
