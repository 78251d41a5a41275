// SPDX-License-Identifier: MulanPSL-2.0

// Package args reads mco-plugin's arguments: the design's names, with the units and defaults of
// the extender's configuration (mco_py/extender/config.py), from the map a scheduler hands over
// (Volcano: the ConfigMap's YAML through yaml.v2; kube-scheduler: pluginConfig args as JSON).
//
// A bad value never stops a scheduler: it is reported as a Problem and the default stands in.
//
//	crName: cluster                # the NodeInterferenceReport to read
//	crStatusTTLSeconds: 30         # older reports are outdated
//	fallbackWhenCROutdated: true   # outdated: basic mode (false: keep using it)
//	hardConstraints:               # reject a node whose fresh value is above; null: off
//	  psiMemoryFullAvg10: 0.0      # the suffix Threshold is accepted (psiIoSomeAvg10Threshold)
//	  psiIoSomeAvg10Threshold: 20.0
//	kataRuntimeClassPrefixes: [kata]
//	scoreWeight: 1.0               # Volcano: multiplies the 0-100 score
//	unknownScore: 50.0             # neutral score: unknown nodes, basic mode
//	maxClockSkewSeconds: 5.0       # a report dated further ahead is unusable
//	herdGuard:                     # count pods placed since a node's sample against it; null: off
//	  enabled: true
//	  perPodScore: 5.0             # interference points one pod adds to each dimension it loads
//	  settleSeconds: 10.0          # counted until the node's sample is this much newer
//	  maxAgeSeconds: 60.0          # and never longer
package args

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"mco.many-core.io/scheduler/policy"
)

// DefaultCRName is the report object read when crName is not given.
const DefaultCRName = "cluster"

// Args are the plugin's arguments, checked.
type Args struct {
	// CRName is the NodeInterferenceReport object (and the prefix of its shards).
	CRName   string
	Settings policy.Settings
}

// Problem is one argument that was not used as given.
type Problem struct {
	Key  string
	Text string
}

func (p Problem) String() string { return p.Key + ": " + p.Text }

// Defaults are the arguments when none are given.
func Defaults() Args {
	return Args{CRName: DefaultCRName, Settings: policy.DefaultSettings()}
}

var known = map[string]bool{
	"crName": true, "crStatusTTLSeconds": true, "fallbackWhenCROutdated": true, "hardConstraints": true,
	"kataRuntimeClassPrefixes": true, "scoreWeight": true, "unknownScore": true, "maxClockSkewSeconds": true,
	"herdGuard": true,
}

var knownHerd = map[string]bool{"enabled": true, "maxAgeSeconds": true, "perPodScore": true, "settleSeconds": true}

// Parse reads raw (keys strings; values as yaml.v2 or encoding/json decode them) into Args. Every
// key that is unknown, of the wrong type or out of range gives a Problem and keeps its default.
func Parse(raw map[string]interface{}) (Args, []Problem) {
	out := Defaults()
	r := reader{raw: raw}
	for _, key := range sortedKeys(raw) {
		if !known[key] {
			r.problem(key, "unknown argument (known: "+strings.Join(sortedKnown(), ", ")+"); ignored")
		}
	}
	if v, ok := r.text("crName"); ok {
		if v == "" {
			r.problem("crName", "must not be empty; using "+DefaultCRName)
		} else {
			out.CRName = v
		}
	}
	s := &out.Settings
	r.number("crStatusTTLSeconds", &s.TTLSeconds, func(v float64) string {
		if v <= 0 {
			return "must be above 0"
		}
		return ""
	})
	r.number("scoreWeight", &s.ScoreWeight, atLeastZero)
	r.number("unknownScore", &s.UnknownScore, func(v float64) string {
		if v < 0 || v > 100 {
			return "must be within 0-100"
		}
		return ""
	})
	r.number("maxClockSkewSeconds", &s.MaxClockSkewSeconds, atLeastZero)
	if v, ok := raw["fallbackWhenCROutdated"]; ok {
		if b, isBool := v.(bool); isBool {
			s.FallbackWhenOutdated = b
		} else {
			r.problem("fallbackWhenCROutdated", fmt.Sprintf("expected true or false, got %s; using %t", show(v), s.FallbackWhenOutdated))
		}
	}
	if v, ok := raw["kataRuntimeClassPrefixes"]; ok {
		if prefixes, good := stringList(v); good {
			s.KataPrefixes = prefixes
		} else {
			r.problem("kataRuntimeClassPrefixes", fmt.Sprintf("expected a list of non-empty strings, got %s; using %v", show(v), s.KataPrefixes))
		}
	}
	if v, ok := raw["hardConstraints"]; ok {
		s.HardConstraints = r.constraints(v, s.HardConstraints)
	}
	if v, ok := raw["herdGuard"]; ok {
		s.Herd = r.herd(v, s.Herd)
	}
	return out, r.problems
}

type reader struct {
	raw      map[string]interface{}
	problems []Problem
}

func (r *reader) problem(key, text string) { r.problems = append(r.problems, Problem{key, text}) }

func (r *reader) text(key string) (string, bool) {
	v, ok := r.raw[key]
	if !ok || v == nil {
		return "", false
	}
	text, isText := v.(string)
	if !isText {
		r.problem(key, fmt.Sprintf("expected a string, got %s; using the default", show(v)))
		return "", false
	}
	return text, true
}

func atLeastZero(v float64) string {
	if v < 0 {
		return "must be at least 0"
	}
	return ""
}

// number sets *into from raw[key] when it is a finite number that check accepts.
func (r *reader) number(key string, into *float64, check func(float64) string) {
	v, ok := r.raw[key]
	if !ok {
		return
	}
	n, isNumber := Number(v)
	if !isNumber || math.IsNaN(n) || math.IsInf(n, 0) {
		r.problem(key, fmt.Sprintf("expected a number, got %s; using %s", show(v), general(*into)))
		return
	}
	if text := check(n); text != "" {
		r.problem(key, fmt.Sprintf("%s, got %s; using %s", text, general(n), general(*into)))
		return
	}
	*into = n
}

// constraints reads hardConstraints: null switches every constraint off; a mapping names signals
// (optionally with the suffix Threshold) and thresholds (null: that one off).
func (r *reader) constraints(v interface{}, defaults []policy.Constraint) []policy.Constraint {
	if v == nil {
		return nil
	}
	entries, ok := mapping(v)
	if !ok {
		r.problem("hardConstraints", fmt.Sprintf("expected a mapping of signal to threshold, got %s; using the defaults", show(v)))
		return defaults
	}
	var thresholds [policy.NumSignals]float64
	var set [policy.NumSignals]bool
	for _, key := range sortedKeys(entries) {
		where := "hardConstraints." + key
		i, known := policy.SignalIndex(strings.TrimSuffix(key, "Threshold"))
		if !known {
			r.problem(where, "unknown signal; use one of "+strings.Join(policy.SignalNames[:], ", ")+" (optionally with the suffix 'Threshold'); ignored")
			continue
		}
		value := entries[key]
		if value == nil {
			continue // null: this spelling sets no constraint
		}
		n, isNumber := Number(value)
		if !isNumber || math.IsNaN(n) || math.IsInf(n, 0) {
			fallback := "the constraint is off"
			for _, c := range defaults {
				if c.Signal == i {
					thresholds[i], set[i] = c.Threshold, true
					fallback = "using " + general(c.Threshold)
				}
			}
			r.problem(where, fmt.Sprintf("expected a number or null, got %s; %s", show(value), fallback))
			continue
		}
		thresholds[i], set[i] = n, true
	}
	out := []policy.Constraint{}
	for i := range set {
		if set[i] {
			out = append(out, policy.Constraint{Signal: i, Threshold: thresholds[i]})
		}
	}
	return out
}

// herd reads herdGuard: null switches the guard off; a mapping sets its fields (each bad one keeps
// its default).
func (r *reader) herd(v interface{}, defaults policy.HerdGuard) policy.HerdGuard {
	if v == nil {
		out := defaults
		out.Enabled = false
		return out
	}
	entries, ok := mapping(v)
	if !ok {
		r.problem("herdGuard", fmt.Sprintf("expected a mapping (enabled, perPodScore, settleSeconds, maxAgeSeconds) or null, got %s; using the defaults", show(v)))
		return defaults
	}
	out := defaults
	for _, key := range sortedKeys(entries) {
		if !knownHerd[key] {
			r.problem("herdGuard."+key, "unknown argument (known: enabled, maxAgeSeconds, perPodScore, settleSeconds); ignored")
		}
	}
	if e, present := entries["enabled"]; present {
		if b, isBool := e.(bool); isBool {
			out.Enabled = b
		} else {
			r.problem("herdGuard.enabled", fmt.Sprintf("expected true or false, got %s; using %t", show(e), out.Enabled))
		}
	}
	sub := reader{raw: entries}
	sub.number("perPodScore", &out.PerPodScore, func(v float64) string {
		if v <= 0 || v > 100 {
			return "must be above 0 and at most 100 (switch the guard off with enabled: false)"
		}
		return ""
	})
	sub.number("settleSeconds", &out.SettleSeconds, atLeastZero)
	sub.number("maxAgeSeconds", &out.MaxAgeSeconds, func(v float64) string {
		if v <= 0 {
			return "must be above 0"
		}
		return ""
	})
	for _, p := range sub.problems {
		r.problem("herdGuard."+p.Key, p.Text)
	}
	return out
}

// Number is v as a float64 when it is a number as yaml.v2 or encoding/json decode one (a bool is not).
func Number(v interface{}) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

// mapping is v as a map with string keys (yaml.v2 decodes nested maps with interface{} keys).
func mapping(v interface{}) (map[string]interface{}, bool) {
	switch m := v.(type) {
	case map[string]interface{}:
		return m, true
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(m))
		for k, value := range m {
			key, ok := k.(string)
			if !ok {
				return nil, false
			}
			out[key] = value
		}
		return out, true
	}
	return nil, false
}

func stringList(v interface{}) ([]string, bool) {
	if v == nil {
		return []string{}, true // null: no runtime class needs a Kata node
	}
	items, ok := v.([]interface{})
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		text, isText := item.(string)
		if !isText || text == "" {
			return nil, false
		}
		out = append(out, text)
	}
	return out, true
}

// Mapping is Parse's input from a value that may be a map with interface{} keys.
func Mapping(v interface{}) (map[string]interface{}, bool) { return mapping(v) }

func sortedKeys(m map[string]interface{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedKnown() []string {
	keys := make([]string, 0, len(known))
	for k := range known {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// show writes a value of the wrong type for a message, cut short.
func show(v interface{}) string {
	text := fmt.Sprintf("%#v", v)
	if len(text) > 60 {
		text = text[:60] + "..."
	}
	return text
}

func general(v float64) string { return fmt.Sprintf("%g", v) }
