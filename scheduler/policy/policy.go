// SPDX-License-Identifier: MulanPSL-2.0

// Package policy decides, from the interference report, whether a node may take a pod and how
// much the pod should prefer it. It is the decision of mco_py/analysis/policy.py, written in Go
// for the scheduler plugins; the two are held equal by the committed test vectors
// (testdata/policy-vectors.json, read by both test suites).
//
// Pure: no Kubernetes types, no I/O, no clock. Callers pass the report (or nil), the time, the
// settings, the pod's runtimeClassName and sensitivity, and the node's name and labels.
//
//   - Report state (ReportState): the report is fresh when it exists, was decoded, is at most
//     TTLSeconds old and not dated more than MaxClockSkewSeconds in the future. Otherwise the
//     plugin runs in basic mode: every node passes except for the Kata rule, and every node gets
//     the same neutral score. With FallbackWhenOutdated false an old report stays in use.
//   - Filter (FilterNode): the Kata rule first (needs no report), then the hard constraints on
//     the node's signals, in SignalNames order. Unknown or absent nodes and absent signals pass.
//   - Score (RawScore and the scalings): 100 - interference, where interference is the node's
//     score, or, for a pod that names the dimensions it is sensitive to, the worst weighted
//     dimension score. Unknown and absent nodes, and every node in basic mode, get UnknownScore.
package policy

import (
	"math"
	"strings"
)

// KataLabel marks a node able to run Kata Containers pods (value KataLabelValue).
const (
	KataLabel      = "katacontainers.io/kata-runtime"
	KataLabelValue = "true"
	// SensitiveToAnnotation names the dimensions a pod's performance depends on.
	SensitiveToAnnotation = "mco.many-core.io/sensitive-to"
	// KubeExtenderMaxScore is kube-scheduler's MaxExtenderPriority.
	KubeExtenderMaxScore = 10
)

// Level is a node's interference level in the report.
type Level uint8

// The levels, in the report's spelling order.
const (
	LevelNone Level = iota
	LevelLow
	LevelMedium
	LevelHigh
	LevelUnknown
)

var levelNames = [...]string{"None", "Low", "Medium", "High", "Unknown"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "Unknown"
}

// ParseLevel reads a level as the report spells it.
func ParseLevel(text string) (Level, bool) {
	for i, name := range levelNames {
		if name == text {
			return Level(i), true
		}
	}
	return LevelUnknown, false
}

// SignalNames are the report's signal keys, in mco_py.model.SIGNAL_NAMES order (the vectors
// check that the two lists are equal). Hard constraints are checked in this order.
var SignalNames = [...]string{
	"psiCpuSomeAvg10",
	"psiMemorySomeAvg10",
	"psiMemoryFullAvg10",
	"psiIoSomeAvg10",
	"psiIoFullAvg10",
	"psiCpuSomeRate",
	"psiMemorySomeRate",
	"psiMemoryFullRate",
	"psiIoSomeRate",
	"psiIoFullRate",
	"llcMissRate",
	"bioLatencyP99Ms",
	"cpuStealPercent",
	"oomKills",
	"psiOnlineCpuSomeRate",
	"psiOnlineIoSomeRate",
	"psiOnlineMemorySomeRate",
	"psiOfflineCpuSomeRate",
	"psiOfflineIoSomeRate",
	"psiOfflineMemorySomeRate",
}

// NumSignals is the number of known signals.
const NumSignals = len(SignalNames)

var signalIndex = func() map[string]int {
	out := make(map[string]int, NumSignals)
	for i, name := range SignalNames {
		out[name] = i
	}
	return out
}()

// SignalIndex is the position of a signal name in SignalNames.
func SignalIndex(name string) (int, bool) {
	i, ok := signalIndex[name]
	return i, ok
}

// Dimension is one resource dimension of a node entry and its 0-100 score.
type Dimension struct {
	Name  string
	Score float64
}

// Node is what the policy needs of one report entry. Never changed once made: snapshots share it.
type Node struct {
	Level Level
	// Score is 0-100, higher means more interference.
	Score float64
	// Dimensions scoring above 0, in the report's order.
	Dimensions []Dimension
	// Sampled is the entry's lastSampleTime, seconds since the epoch (0: not given; the report's
	// Updated stands in).
	Sampled float64
	signals [NumSignals]float64
	present uint32
}

// SetSignal records the value of signal i (an index into SignalNames).
func (n *Node) SetSignal(i int, value float64) {
	n.signals[i] = value
	n.present |= 1 << uint(i)
}

// Signal is the value of signal i and whether the entry has it.
func (n *Node) Signal(i int) (float64, bool) {
	return n.signals[i], n.present&(1<<uint(i)) != 0
}

// Nodes finds a report's entries by node name.
type Nodes interface {
	// Get is the entry of name, or nil.
	Get(name string) *Node
	// Len is the number of entries.
	Len() int
}

// NodeMap is Nodes held in one map.
type NodeMap map[string]*Node

// Get implements Nodes.
func (m NodeMap) Get(name string) *Node { return m[name] }

// Len implements Nodes.
func (m NodeMap) Len() int { return len(m) }

// Report is the report as the policy needs it.
type Report struct {
	// Updated is status.lastUpdateTime, seconds since the epoch.
	Updated float64
	Nodes   Nodes
}

// Constraint rejects a node whose fresh value of SignalNames[Signal] is above Threshold.
type Constraint struct {
	Signal    int
	Threshold float64
}

// Settings are what the policy needs of the plugin's arguments (the extender's config keys).
type Settings struct {
	// TTLSeconds: a report older than this is outdated (crStatusTTLSeconds).
	TTLSeconds float64
	// HardConstraints, in SignalNames order (hardConstraints).
	HardConstraints []Constraint
	// FallbackWhenOutdated: an outdated report switches to basic mode (fallbackWhenCROutdated).
	FallbackWhenOutdated bool
	// KataPrefixes: a pod whose runtimeClassName starts with one needs a Kata node.
	KataPrefixes []string
	// ScoreWeight multiplies Volcano scores (Volcano adds plugin scores raw).
	ScoreWeight float64
	// UnknownScore is the neutral 0-100 score of unknown nodes and of every node in basic mode.
	UnknownScore float64
	// MaxClockSkewSeconds: a report dated further in the future is unusable.
	MaxClockSkewSeconds float64
	// Herd counts the pods placed since a node's sample against it (herdGuard).
	Herd HerdGuard
}

// DefaultSettings are the extender's defaults.
func DefaultSettings() Settings {
	mem, _ := SignalIndex("psiMemoryFullAvg10")
	io, _ := SignalIndex("psiIoSomeAvg10")
	return Settings{
		TTLSeconds:           30,
		HardConstraints:      []Constraint{{mem, 0}, {io, 20}},
		FallbackWhenOutdated: true,
		KataPrefixes:         []string{"kata"},
		ScoreWeight:          1,
		UnknownScore:         50,
		MaxClockSkewSeconds:  5,
		Herd:                 DefaultHerdGuard(),
	}
}

// Fallback says why basic mode is on (bounded metric label values).
type Fallback uint8

// The fallbacks.
const (
	FallbackNone Fallback = iota
	FallbackMissing
	FallbackUnreadable
	FallbackStale
	FallbackFuture
)

// Fallbacks lists every fallback but FallbackNone, in metric order.
var Fallbacks = [...]Fallback{FallbackMissing, FallbackUnreadable, FallbackStale, FallbackFuture}

var fallbackNames = [...]string{"none", "missing", "unreadable", "stale", "future"}

func (f Fallback) String() string { return fallbackNames[f] }

// State is the report as the policy sees it at one instant.
type State struct {
	// Report is the report to use; nil in basic mode.
	Report   *Report
	Fallback Fallback
	// Detail explains the state (logs and reasons).
	Detail string
	// Age of the report in seconds; valid when HasAge.
	Age    float64
	HasAge bool
	// OutdatedInUse: an outdated report is used because FallbackWhenOutdated is off.
	OutdatedInUse bool
}

// BasicMode is true when no report is used.
func (s *State) BasicMode() bool { return s.Report == nil }

// ReportState decides whether report can be used at now. problem explains why there is no report
// (or why the latest document was rejected); unreadable forces basic mode.
func ReportState(report *Report, now float64, s *Settings, problem string, unreadable bool) State {
	if unreadable {
		return State{Fallback: FallbackUnreadable, Detail: orText(problem, "report unreadable")}
	}
	if report == nil {
		return State{Fallback: FallbackMissing, Detail: orText(problem, "no report")}
	}
	age := now - report.Updated
	if math.IsNaN(age) || math.IsInf(age, 0) {
		return State{Fallback: FallbackUnreadable, Detail: "report time is not a number"}
	}
	if age < -s.MaxClockSkewSeconds {
		return State{
			Fallback: FallbackFuture,
			Detail:   "report is dated " + fixed0(-age) + "s in the future (allowed skew " + general(s.MaxClockSkewSeconds) + "s)",
			Age:      age, HasAge: true,
		}
	}
	if age > s.TTLSeconds {
		if s.FallbackWhenOutdated {
			return State{
				Fallback: FallbackStale,
				Detail:   "report is " + fixed0(age) + "s old (TTL " + general(s.TTLSeconds) + "s)",
				Age:      age, HasAge: true,
			}
		}
		return State{Report: report, Detail: "outdated report (" + fixed0(age) + "s old) in use", Age: age, HasAge: true, OutdatedInUse: true}
	}
	return State{Report: report, Detail: "report fresh", Age: age, HasAge: true}
}

func orText(text, otherwise string) string {
	if text == "" {
		return otherwise
	}
	return text
}

// Rule names why a node passed or was rejected (a bounded metric label).
type Rule uint8

// The rules.
const (
	RuleOK Rule = iota
	RuleKata
	RuleConstraint
	RuleFallback
	RuleNoData
	RuleLabelsUnknown
)

// Rules lists every rule, in metric order.
var Rules = [...]Rule{RuleOK, RuleKata, RuleConstraint, RuleFallback, RuleNoData, RuleLabelsUnknown}

var ruleNames = [...]string{"ok", "kata", "constraint", "fallback", "no-data", "labels-unknown"}

func (r Rule) String() string { return ruleNames[r] }

// Verdict is the filter result for one node.
type Verdict struct {
	Passed bool
	// Reason says why it was rejected (shown in kubectl describe pod); empty when it passed.
	Reason string
	Rule   Rule
}

// NeedsKata is true when a pod with runtimeClass must run on a Kata node.
func NeedsKata(runtimeClass string, s *Settings) bool {
	if runtimeClass == "" {
		return false
	}
	for _, prefix := range s.KataPrefixes {
		if prefix != "" && strings.HasPrefix(runtimeClass, prefix) {
			return true
		}
	}
	return false
}

func ageText(state *State) string {
	if !state.HasAge {
		return "no report"
	}
	return "report " + fixed0(state.Age) + "s old"
}

// FilterNode passes or rejects node for a pod with runtimeClass. labelsKnown false means the node's
// labels are not known: the Kata rule cannot be checked and the node passes it (fail open).
func FilterNode(state *State, node string, labels map[string]string, labelsKnown bool, runtimeClass string, s *Settings) Verdict {
	kataUnchecked := false
	if NeedsKata(runtimeClass, s) {
		if !labelsKnown {
			kataUnchecked = true
		} else if labels[KataLabel] != KataLabelValue {
			return Verdict{
				Reason: "mco: node " + node + " has no label " + KataLabel + "=" + KataLabelValue +
					" required by runtimeClassName " + runtimeClass,
				Rule: RuleKata,
			}
		}
	}
	pass := func(rule Rule) Verdict {
		if kataUnchecked {
			return Verdict{Passed: true, Rule: RuleLabelsUnknown}
		}
		return Verdict{Passed: true, Rule: rule}
	}
	if state.Report == nil {
		return pass(RuleFallback)
	}
	entry := state.Report.Nodes.Get(node)
	if entry == nil || entry.Level == LevelUnknown {
		return pass(RuleNoData)
	}
	for _, c := range s.HardConstraints {
		if value, ok := entry.Signal(c.Signal); ok && value > c.Threshold {
			return Verdict{
				Reason: "mco: node " + node + " " + SignalNames[c.Signal] + "=" + general(value) +
					" > threshold " + general(c.Threshold) + " (" + ageText(state) + ")",
				Rule: RuleConstraint,
			}
		}
	}
	return pass(RuleOK)
}

// PodInterference is the node's interference for a pod with sensitivity: the worst weighted
// dimension it names. An entry without dimensions scores 0 in each when its score is 0;
// otherwise its analyzer writes no dimensions, and the node score stands in for each.
func PodInterference(entry *Node, sensitivity *Sensitivity) float64 {
	if len(entry.Dimensions) == 0 {
		if entry.Score > 0 {
			return entry.Score
		}
		return 0
	}
	worst := 0.0
	for _, w := range sensitivity.Weights {
		for _, d := range entry.Dimensions {
			if d.Name == w.Name {
				if v := w.Weight * d.Score; v > worst {
					worst = v
				}
				break
			}
		}
	}
	return worst
}

// RawScore is 0-100, higher is better for the pod; sensitivity nil scores by the node score.
func RawScore(state *State, node string, s *Settings, sensitivity *Sensitivity) float64 {
	if state.Report == nil {
		return s.UnknownScore
	}
	entry := state.Report.Nodes.Get(node)
	if entry == nil || entry.Level == LevelUnknown || math.IsNaN(entry.Score) || math.IsInf(entry.Score, 0) {
		return s.UnknownScore
	}
	interference := entry.Score
	if sensitivity != nil {
		interference = PodInterference(entry, sensitivity)
	}
	return math.Min(100, math.Max(0, 100-interference))
}

// VolcanoScore is RawScore times ScoreWeight: never negative, never NaN (Volcano sums plugin scores).
func VolcanoScore(state *State, node string, s *Settings, sensitivity *Sensitivity) float64 {
	return VolcanoScale(RawScore(state, node, s, sensitivity), s)
}

// FrameworkScore is RawScore as a kube-scheduler framework score: an integer 0-100 (the
// framework applies the profile's weight), rounded half to even as Python's round().
func FrameworkScore(state *State, node string, s *Settings, sensitivity *Sensitivity) int64 {
	return FrameworkScale(RawScore(state, node, s, sensitivity))
}

// KubeExtenderScore is RawScore on kube-scheduler's extender scale: an integer 0..10.
func KubeExtenderScore(state *State, node string, s *Settings, sensitivity *Sensitivity) int64 {
	v := math.RoundToEven(RawScore(state, node, s, sensitivity) / 10)
	return int64(math.Min(KubeExtenderMaxScore, math.Max(0, v)))
}
