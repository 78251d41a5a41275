// SPDX-License-Identifier: MulanPSL-2.0

// Package kube is mco-plugin for kube-scheduler: a framework plugin with PreFilter, Filter,
// PreScore, Score and NormalizeScore, reading the NodeInterferenceReport through an informer
// started when the plugin is built. Register it with NewSchedulerCommand(app.WithPlugin(Name,
// New)) and enable it in a profile at every extension point it has (multiPoint): PreFilter and
// PreScore read the report once a cycle, where Filter and Score alone would read it again:
//
//	profiles:
//	- schedulerName: mco-scheduler
//	  plugins:
//	    multiPoint: {enabled: [{name: mco-plugin, weight: 1}]}
//	  pluginConfig:
//	  - name: mco-plugin
//	    args: {crName: cluster, crStatusTTLSeconds: 30, hardConstraints: {psiIoSomeAvg10Threshold: 20}}
//
// The arguments are the Volcano plugin's (package args); a bad one is logged and its default
// used. A pod's cycle reads the report once, in PreFilter (PreScore for scoring).
//
// Herd guard (herdGuard): Reserve records the pod on its node (Unreserve forgets it); until the
// node's report has a sample taken after it, Score lowers the node by what such pods add to the
// dimensions they load. A pod placed away from the node it would have scored best without the
// guard gets an Event (reason MCOHerdGuard) saying which node, dimension, level and placements.
package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"k8s.io/component-base/metrics/legacyregistry"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
	"mco.many-core.io/scheduler/source"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "mco-plugin"

const (
	filterKey fwk.StateKey = Name + "/filter"
	scoreKey  fwk.StateKey = Name + "/score"
)

var (
	sharedOnce sync.Once
	shared     *core.Shared
)

// Shared is the process's state, made (and its metrics registered) on first use.
func Shared() *core.Shared {
	sharedOnce.Do(func() {
		shared = core.New()
		legacyregistry.RawMustRegister(shared.Metrics)
	})
	return shared
}

// Plugin is mco-plugin in one kube-scheduler profile.
type Plugin struct {
	shared *core.Shared
	args   args.Args
	// src is the report source (nil: none could be made; basic mode).
	src *source.Source
	// look is the report as a cycle sees it, under the plugin's settings.
	look func(settings policy.Settings) core.View
	// waited is the report version a requeue hint last waited for.
	waited atomic.Value
	// events records the herd guard's Events on pods (nil: none).
	events events.EventRecorder
	// clock is the time of placements.
	clock func() time.Time
}

var (
	_ framework.EnqueueExtensions = &Plugin{}
	_ framework.PreFilterPlugin   = &Plugin{}
	_ framework.FilterPlugin      = &Plugin{}
	_ framework.PreScorePlugin    = &Plugin{}
	_ framework.ScorePlugin       = &Plugin{}
	_ framework.ReservePlugin     = &Plugin{}
)

// New builds the plugin of a profile: its arguments read (JSON or YAML, the Volcano plugin's
// names), its report source started with the scheduler's own client configuration.
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	s := Shared()
	raw := map[string]interface{}{}
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &raw); err != nil {
			s.Metrics.Problem("argument", "arguments cannot be read ("+err.Error()+"); using the defaults")
			raw = map[string]interface{}{}
		}
	}
	parsed := s.Arguments(raw)
	src := s.Source(h.KubeConfig(), parsed.CRName)
	p := &Plugin{shared: s, args: parsed, src: src, events: h.EventRecorder(), clock: time.Now}
	p.look = func(settings policy.Settings) core.View { return s.Look(src, settings, time.Now()) }
	klog.InfoS("mco-plugin ready", "crName", parsed.CRName, "ttlSeconds", parsed.Settings.TTLSeconds)
	return p, nil
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

type filterState struct {
	view         core.View
	runtimeClass string
}

func (f *filterState) Clone() fwk.StateData { return f }

type scoreState struct {
	view        core.View
	sensitivity *policy.Sensitivity
	reason      metrics.ScoreReason
	// counted: PreScore counted the cycle's nodes (else each Score call counts its own).
	counted bool
	// now is the cycle's time (seconds); steering follows the herd guard's effect (nil: guard off).
	now      float64
	steering *core.Steering
}

func (s *scoreState) Clone() fwk.StateData { return s }

// ReportEvent is the report objects' resource as kube-scheduler names cluster events of custom
// resources (<plural>.<version>.<group>): it watches them to retry the pods this plugin rejected.
const ReportEvent fwk.EventResource = "nodeinterferencereports.v1alpha1.mco.many-core.io"

// EventsToRegister names what can make a node this plugin rejected acceptable: a new report (a node
// got quieter, or the report went stale: basic mode), a new node, a node's labels (Kata). A pod
// rejected here waits for one of these, not for kube-scheduler's periodic flush.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: ReportEvent, ActionType: fwk.All}, QueueingHintFn: p.reportChanged},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
	}, nil
}

// reportChanged retries a rejected pod when the report object changes. kube-scheduler hears of the
// change from its own informer; the pod's next cycle must see it in the plugin's, so the first pod
// of an event waits (briefly: both watch the same API server) until the plugin's source has that
// version or a later one. kube-scheduler runs hints holding its queue's lock, so the other pods of
// the same event do not wait again, and the wait is capped.
func (p *Plugin) reportChanged(_ klog.Logger, _ *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	if p.src == nil {
		return fwk.Queue, nil
	}
	version := ""
	if obj, ok := newObj.(metav1.Object); ok {
		if obj.GetName() != p.args.CRName {
			return fwk.QueueSkip, nil // another report: not the one this plugin reads
		}
		version = obj.GetResourceVersion()
	}
	if last, _ := p.waited.Load().(string); last != version || version == "" {
		p.waited.Store(version)
		p.src.WaitFor(version, hintWait)
	}
	return fwk.Queue, nil
}

// hintWait caps how long a requeue hint waits for the plugin's informer.
const hintWait = 200 * time.Millisecond

// PreFilter reads the report once for the pod's cycle; it skips Filter when nothing can reject a
// node (no report in use or no hard constraint, and no Kata runtime class).
func (p *Plugin) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	st := &filterState{view: p.look(p.args.Settings)}
	if pod.Spec.RuntimeClassName != nil {
		st.runtimeClass = *pod.Spec.RuntimeClassName
	}
	needsKata := policy.NeedsKata(st.runtimeClass, st.view.Settings)
	if !needsKata && (st.view.State.BasicMode() || len(st.view.Settings.HardConstraints) == 0) {
		rule := policy.RuleOK
		if st.view.State.BasicMode() {
			rule = policy.RuleFallback
		}
		p.shared.Metrics.Filters(metrics.KubeFilter, policy.Verdict{Passed: true, Rule: rule}, len(nodes))
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(filterKey, st)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin (no incremental updates).
func (p *Plugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects a node under hard pressure, or without Kata for a Kata pod, as unresolvable
// (preemption cannot lower interference).
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	st := p.filterState(state, pod)
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	verdict := policy.FilterNode(&st.view.State, node.Name, node.Labels, true, st.runtimeClass, st.view.Settings)
	p.shared.Metrics.Filter(metrics.KubeFilter, verdict)
	if verdict.Passed {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, verdict.Reason)
}

// filterState is what PreFilter read for the cycle; read now (and kept for the cycle's other
// nodes) when a profile enables Filter without PreFilter.
func (p *Plugin) filterState(state fwk.CycleState, pod *v1.Pod) *filterState {
	if data, err := state.Read(filterKey); err == nil {
		if st, ok := data.(*filterState); ok {
			return st
		}
	}
	st := &filterState{view: p.look(p.args.Settings)}
	if pod.Spec.RuntimeClassName != nil {
		st.runtimeClass = *pod.Spec.RuntimeClassName
	}
	state.Write(filterKey, st) // Filter runs in parallel: a second writer writes an equal view
	return st
}

// PreScore reads the pod's sensitive-to hint once; in basic mode it skips Score (every node the same).
func (p *Plugin) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	st := p.readScore(pod, len(nodes))
	if st.view.State.BasicMode() {
		return fwk.NewStatus(fwk.Skip)
	}
	state.Write(scoreKey, st)
	return nil
}

// scoreState is what PreScore read for the cycle; read now (and kept for the cycle's other nodes)
// when a profile enables Score without PreScore.
func (p *Plugin) scoreState(state fwk.CycleState, pod *v1.Pod) *scoreState {
	if data, err := state.Read(scoreKey); err == nil {
		if st, ok := data.(*scoreState); ok {
			return st
		}
	}
	st := p.readScore(pod, 0)
	state.Write(scoreKey, st) // Score runs in parallel: a second writer writes an equal view
	return st
}

// readScore reads the report and the pod's hint for scoring nodes of a cycle, counting them.
func (p *Plugin) readScore(pod *v1.Pod, nodes int) *scoreState {
	st := &scoreState{view: p.look(p.args.Settings), counted: nodes > 0, now: core.Seconds(p.clock())}
	if st.view.Settings.Herd.Enabled {
		st.steering = &core.Steering{}
	}
	text, present := pod.Annotations[policy.SensitiveToAnnotation]
	st.sensitivity, st.reason = p.shared.Sensitivity(&st.view.State, text, present)
	p.shared.Metrics.Score(metrics.KubePrioritize, st.reason, nodes)
	return st
}

// Score is the node's 0-100 preference for the pod (higher: quieter).
func (p *Plugin) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	st := p.scoreState(state, pod)
	if !st.counted {
		p.shared.Metrics.Score(metrics.KubePrioritize, st.reason, 1)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, nil
	}
	if st.steering == nil {
		return policy.FrameworkScore(&st.view.State, node.Name, st.view.Settings, st.sensitivity), nil
	}
	g := p.shared.SteeredScore(&st.view, node.Name, st.sensitivity, st.now, metrics.KubePrioritize, st.steering)
	return policy.FrameworkScale(g.Score), nil
}

// Reserve records the pod on nodeName for the herd guard, and tells the pod (an Event) when the
// guard placed it away from the node it would have scored best.
func (p *Plugin) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if !p.args.Settings.Herd.Enabled {
		return nil
	}
	var st *scoreState
	if data, err := state.Read(scoreKey); err == nil {
		st, _ = data.(*scoreState)
	}
	var sensitivity *policy.Sensitivity
	if st != nil {
		sensitivity = st.sensitivity
	}
	if st != nil && st.steering != nil {
		// The node as the pod scored it: before the pod itself is counted on it.
		chosen, _ := p.shared.Guarded(&st.view, nodeName, sensitivity, st.now)
		p.steered(pod, st.steering, nodeName, chosen)
	}
	cpu, memory := requests(pod)
	p.shared.Place(&p.args.Settings.Herd, nodeName, string(pod.UID), policy.PodLoad(sensitivity, cpu, memory), core.Seconds(p.clock()))
	return nil
}

// steered counts the pod, and tells it with an Event, when the guard placed it on chosen away from
// its best node.
func (p *Plugin) steered(pod *v1.Pod, steering *core.Steering, nodeName string, chosen policy.Guarded) {
	if steer, steered := steering.Steered(nodeName, chosen); steered {
		p.shared.Metrics.Steered(metrics.KubePrioritize, steer.Guarded.Dimension)
		if p.events != nil {
			p.events.Eventf(pod, nil, v1.EventTypeNormal, HerdReason, "Scheduling", "%s", steer.Message(core.Seconds(p.clock())))
		}
	}
}

// Unreserve forgets the pod's placement (its binding failed or was undone).
func (p *Plugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	p.shared.Herd.Remove(string(pod.UID))
}

// HerdReason is the reason of the herd guard's Events.
const HerdReason = "MCOHerdGuard"

// requests says whether the pod requests cpu and memory.
func requests(pod *v1.Pod) (cpu, memory bool) {
	for i := range pod.Spec.Containers {
		r := pod.Spec.Containers[i].Resources.Requests
		cpu = cpu || !r.Cpu().IsZero()
		memory = memory || !r.Memory().IsZero()
	}
	return cpu, memory
}

// ScoreExtensions implements framework.ScorePlugin.
func (p *Plugin) ScoreExtensions() framework.ScoreExtensions { return p }

// NormalizeScore keeps the scores on their absolute 0-100 scale, clamped into the framework's
// range: stretching them to the best and worst candidate would let a difference of one point
// between calm nodes outweigh every other plugin.
func (p *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *fwk.Status {
	for i := range scores {
		scores[i].Score = min(framework.MaxNodeScore, max(framework.MinNodeScore, scores[i].Score))
	}
	return nil
}
