// SPDX-License-Identifier: MulanPSL-2.0

// Package metrics counts the plugins' decisions and report problems and exports them, with the
// report's state, on the scheduler's own /metrics. The names are the extender's
// (mco_extender_decisions_total, mco_extender_basic_mode, ...), so the dashboard and the alerts
// read either; a scheduler runs one of the two.
package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"mco.many-core.io/scheduler/policy"
)

// Verb is the decision's hook, as the extender's route label names it.
type Verb uint8

// The verbs.
const (
	VolcanoPredicate Verb = iota
	VolcanoPrioritize
	KubeFilter
	KubePrioritize
)

var verbNames = [...]string{"volcano_predicate", "volcano_prioritize", "kube_filter", "kube_prioritize"}

// ScoreReason says how a pod's scores were made (the extender's labels).
type ScoreReason uint8

// The score reasons.
const (
	ScoreReport      ScoreReason = iota // by the node score
	ScoreDimensions                     // by the pod's sensitive-to weights
	ScoreInvalidHint                    // by the node score: the annotation could not be read
	ScoreFallback                       // basic mode: every node the same
)

var scoreNames = [...]string{"report", "dimensions", "invalid-hint", "fallback"}

// Problem kinds (bounded label values).
var problemKinds = []string{"watch", "unreadable", "shards", "argument", "hint"}

// Metrics is one process's counters. Safe for concurrent use; the hot path is one atomic add.
type Metrics struct {
	filters  [len(verbNames)][2][len(policy.Rules)]atomic.Uint64
	scores   [len(verbNames)][len(scoreNames)]atomic.Uint64
	problems map[string]*atomic.Uint64
	state    atomic.Pointer[func() (policy.State, int)]
	// discounted counts node scores the herd guard lowered, per verb.
	discounted [len(verbNames)]atomic.Uint64
	steerMu    sync.Mutex
	steered    map[steerKey]uint64
	held       atomic.Pointer[func() int]

	logMu    sync.Mutex
	logged   map[string]time.Time
	muted    map[string]int
	interval time.Duration
}

// New makes the counters; Register exports them.
func New(logInterval time.Duration) *Metrics {
	m := &Metrics{problems: map[string]*atomic.Uint64{}, steered: map[steerKey]uint64{}, logged: map[string]time.Time{}, muted: map[string]int{}, interval: logInterval}
	for _, kind := range problemKinds {
		m.problems[kind] = &atomic.Uint64{}
	}
	return m
}

// Filter counts one node passed or rejected by rule.
func (m *Metrics) Filter(verb Verb, v policy.Verdict) { m.Filters(verb, v, 1) }

// Filters counts n nodes with the same verdict.
func (m *Metrics) Filters(verb Verb, v policy.Verdict, n int) {
	passed := 0
	if v.Passed {
		passed = 1
	}
	m.filters[verb][passed][v.Rule].Add(uint64(n))
}

// Score counts n nodes scored for one pod.
func (m *Metrics) Score(verb Verb, reason ScoreReason, n int) {
	m.scores[verb][reason].Add(uint64(n))
}

type steerKey struct {
	verb      Verb
	dimension string
}

// maxSteerDimensions bounds the dimension label values (the report names its dimensions); the
// rest count as "other".
const maxSteerDimensions = 32

// Discounted counts n node scores the herd guard lowered.
func (m *Metrics) Discounted(verb Verb, n int) { m.discounted[verb].Add(uint64(n)) }

// Steered counts a pod the herd guard placed away from its best node, by the dimension whose
// estimate decided it.
func (m *Metrics) Steered(verb Verb, dimension string) {
	m.steerMu.Lock()
	defer m.steerMu.Unlock()
	key := steerKey{verb, dimension}
	if _, seen := m.steered[key]; !seen && len(m.steered) >= maxSteerDimensions {
		key.dimension = "other"
	}
	m.steered[key]++
}

// SetHeld names what the herd guard's ledger gauge reads at scrape time (placements held).
func (m *Metrics) SetHeld(held func() int) { m.held.Store(&held) }

// SetState names what the state gauges read at scrape time: the report's state under the
// settings in force, and the number of entries in the report in use.
func (m *Metrics) SetState(state func() (policy.State, int)) { m.state.Store(&state) }

// Problem counts a problem of kind and logs it at most once per interval per kind, saying how many
// were not logged since.
func (m *Metrics) Problem(kind, text string) {
	if c, ok := m.problems[kind]; ok {
		c.Add(1)
	}
	m.logMu.Lock()
	now := time.Now()
	last, seen := m.logged[kind]
	if seen && now.Sub(last) < m.interval {
		m.muted[kind]++
		m.logMu.Unlock()
		return
	}
	muted := m.muted[kind]
	m.logged[kind], m.muted[kind] = now, 0
	m.logMu.Unlock()
	klog.InfoS("mco-plugin: "+text, "kind", kind, "suppressedSinceLast", muted)
}

var (
	decisionsDesc = prometheus.NewDesc("mco_extender_decisions_total",
		"Filter/score decisions per node, by verb, result (pass, reject, score) and reason",
		[]string{"verb", "result", "reason"}, nil)
	basicDesc = prometheus.NewDesc("mco_extender_basic_mode",
		"1 when the plugin runs in basic mode (fallback: every node passes)", nil, nil)
	fallbackDesc = prometheus.NewDesc("mco_extender_fallback",
		"1 for the reason basic mode is on (all 0 while the report is used)", []string{"reason"}, nil)
	ageDesc = prometheus.NewDesc("mco_extender_report_age_seconds",
		"Age of the report in use or last seen (NaN: none)", nil, nil)
	outdatedDesc = prometheus.NewDesc("mco_extender_report_outdated_in_use",
		"1 when an outdated report is used because fallbackWhenCROutdated is false", nil, nil)
	nodesDesc = prometheus.NewDesc("mco_scheduler_plugin_report_nodes",
		"Entries in the report in use (0 in basic mode)", nil, nil)
	discountedDesc = prometheus.NewDesc("mco_scheduler_plugin_herd_discounted_total",
		"Node scores the herd guard lowered for pods placed on the node since its report sample, by verb",
		[]string{"verb"}, nil)
	steeredDesc = prometheus.NewDesc("mco_scheduler_plugin_herd_steered_total",
		"Pods the herd guard placed away from the node they scored best without it, by verb and the "+
			"dimension whose estimate decided it (node: an entry without dimensions)",
		[]string{"verb", "dimension"}, nil)
	heldDesc = prometheus.NewDesc("mco_scheduler_plugin_herd_placements",
		"Recent placements the herd guard holds (counted against their nodes until a later sample)", nil, nil)
	problemsDesc = prometheus.NewDesc("mco_scheduler_plugin_problems_total",
		"Report and argument problems, by kind (watch: list/watch errors; unreadable: a report object "+
			"that cannot be decoded; shards: a generation not yet whole; argument: a plugin argument "+
			"replaced by its default; hint: a sensitive-to annotation that cannot be read)",
		[]string{"kind"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{decisionsDesc, basicDesc, fallbackDesc, ageDesc, outdatedDesc, nodesDesc, problemsDesc,
		discountedDesc, steeredDesc, heldDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	results := [2]string{"reject", "pass"}
	for verb := range m.filters {
		if Verb(verb) != VolcanoPredicate && Verb(verb) != KubeFilter {
			continue
		}
		for passed := range m.filters[verb] {
			for rule := range m.filters[verb][passed] {
				if n := m.filters[verb][passed][rule].Load(); n > 0 {
					ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(n),
						verbNames[verb], results[passed], policy.Rules[rule].String())
				}
			}
		}
	}
	for verb := range m.scores {
		for reason := range m.scores[verb] {
			if n := m.scores[verb][reason].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(n),
					verbNames[verb], "score", scoreNames[reason])
			}
		}
	}
	for _, kind := range problemKinds {
		ch <- prometheus.MustNewConstMetric(problemsDesc, prometheus.CounterValue, float64(m.problems[kind].Load()), kind)
	}
	for _, verb := range [...]Verb{VolcanoPrioritize, KubePrioritize} {
		ch <- prometheus.MustNewConstMetric(discountedDesc, prometheus.CounterValue, float64(m.discounted[verb].Load()), verbNames[verb])
	}
	m.steerMu.Lock()
	for key, n := range m.steered {
		ch <- prometheus.MustNewConstMetric(steeredDesc, prometheus.CounterValue, float64(n), verbNames[key.verb], key.dimension)
	}
	m.steerMu.Unlock()
	if held := m.held.Load(); held != nil {
		ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64((*held)()))
	}
	read := m.state.Load()
	if read == nil {
		return // no session yet: the state is not known
	}
	state, nodes := (*read)()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	gauge(basicDesc, flag(state.BasicMode()))
	for _, f := range policy.Fallbacks {
		gauge(fallbackDesc, flag(state.Fallback == f), f.String())
	}
	age := math.NaN()
	if state.HasAge {
		age = state.Age
	}
	gauge(ageDesc, age)
	gauge(outdatedDesc, flag(state.OutdatedInUse))
	gauge(nodesDesc, float64(nodes))
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
