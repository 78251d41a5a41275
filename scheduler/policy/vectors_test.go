// SPDX-License-Identifier: MulanPSL-2.0

package policy_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/policy"
	"mco.many-core.io/scheduler/report"
)

// The table is written by `python -m tests.analysis.policy_vectors` from the Python policy; the
// Python tests check it is current, and these run every case through the Go policy.
type table struct {
	SignalNames []string `json:"signalNames"`
	Settings    []struct {
		Args   map[string]interface{} `json:"args"`
		Expect struct {
			TTLSeconds           float64          `json:"ttlSeconds"`
			HardConstraints      [][2]interface{} `json:"hardConstraints"`
			FallbackWhenOutdated bool             `json:"fallbackWhenOutdated"`
			KataPrefixes         []string         `json:"kataPrefixes"`
			ScoreWeight          float64          `json:"scoreWeight"`
			UnknownScore         float64          `json:"unknownScore"`
			MaxClockSkewSeconds  float64          `json:"maxClockSkewSeconds"`
		} `json:"expect"`
	} `json:"settings"`
	Reports []struct {
		Status     map[string]interface{}   `json:"status"`
		Shards     []map[string]interface{} `json:"shards"`
		Missing    *string                  `json:"missing"`
		Unreadable *string                  `json:"unreadable"`
	} `json:"reports"`
	Pods []struct {
		RuntimeClass *string `json:"runtimeClass"`
		SensitiveTo  *string `json:"sensitiveTo"`
	} `json:"pods"`
	Labels      []map[string]string `json:"labels"`
	Sensitivity []struct {
		Text    string           `json:"text"`
		Weights [][2]interface{} `json:"weights"`
		Error   *string          `json:"error"`
	} `json:"sensitivity"`
	Cases []struct {
		Settings int     `json:"settings"`
		Report   int     `json:"report"`
		Now      float64 `json:"now"`
		Pod      int     `json:"pod"`
		Node     string  `json:"node"`
		Labels   int     `json:"labels"`
		Expect   struct {
			Fallback      string   `json:"fallback"`
			Detail        *string  `json:"detail"`
			Age           *float64 `json:"age"`
			OutdatedInUse bool     `json:"outdatedInUse"`
			Passed        bool     `json:"passed"`
			Rule          string   `json:"rule"`
			Reason        string   `json:"reason"`
			Raw           float64  `json:"raw"`
			Framework     int64    `json:"framework"`
			Volcano       float64  `json:"volcano"`
			KubeExtender  int64    `json:"kubeExtender"`
		} `json:"expect"`
	} `json:"cases"`
}

func load(t *testing.T) *table {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var tab table
	if err := json.Unmarshal(data, &tab); err != nil {
		t.Fatalf("testdata/vectors.json: %v", err)
	}
	if len(tab.Cases) < 500 {
		t.Fatalf("only %d cases: the table is not what the generator writes", len(tab.Cases))
	}
	return &tab
}

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || (a == 0 && b == 0) }

func TestSignalNamesAreThePythonOnes(t *testing.T) {
	tab := load(t)
	if len(tab.SignalNames) != policy.NumSignals {
		t.Fatalf("Python has %d signals, Go %d", len(tab.SignalNames), policy.NumSignals)
	}
	for i, name := range tab.SignalNames {
		if policy.SignalNames[i] != name {
			t.Errorf("signal %d: Python %q, Go %q", i, name, policy.SignalNames[i])
		}
	}
}

// settingsOf reads a case's arguments both ways a scheduler hands them over: JSON-decoded (kube-
// scheduler) here, and the same values as yaml.v2 would type them in args' own tests.
func settingsOf(t *testing.T, tab *table) []policy.Settings {
	t.Helper()
	out := make([]policy.Settings, len(tab.Settings))
	for i, s := range tab.Settings {
		parsed, problems := args.Parse(s.Args)
		if len(problems) > 0 {
			t.Fatalf("settings %d: %v", i, problems)
		}
		got, want := parsed.Settings, s.Expect
		if !same(got.TTLSeconds, want.TTLSeconds) || got.FallbackWhenOutdated != want.FallbackWhenOutdated ||
			!same(got.ScoreWeight, want.ScoreWeight) || !same(got.UnknownScore, want.UnknownScore) ||
			!same(got.MaxClockSkewSeconds, want.MaxClockSkewSeconds) || len(got.KataPrefixes) != len(want.KataPrefixes) ||
			len(got.HardConstraints) != len(want.HardConstraints) {
			t.Fatalf("settings %d: Go %+v, Python %+v", i, got, want)
		}
		for k, p := range want.KataPrefixes {
			if got.KataPrefixes[k] != p {
				t.Fatalf("settings %d: prefixes Go %v, Python %v", i, got.KataPrefixes, want.KataPrefixes)
			}
		}
		for k, c := range want.HardConstraints {
			g := got.HardConstraints[k]
			if policy.SignalNames[g.Signal] != c[0].(string) || !same(g.Threshold, c[1].(float64)) {
				t.Fatalf("settings %d: constraint %d Go %s=%v, Python %v", i, k, policy.SignalNames[g.Signal], g.Threshold, c)
			}
		}
		out[i] = got
	}
	return out
}

// stateOf is what a reader reaches with report r at now (and whether the detail is the decoder's
// own words, which each language says its way).
func stateOf(tab *table, r int, now float64, s *policy.Settings) (policy.State, bool) {
	doc := tab.Reports[r]
	switch {
	case doc.Missing != nil:
		return policy.ReportState(nil, now, s, *doc.Missing, false), false
	case doc.Unreadable != nil:
		return policy.ReportState(nil, now, s, *doc.Unreadable, true), false
	}
	head, err := report.DecodeStatus(doc.Status)
	if err != nil {
		return policy.ReportState(nil, now, s, err.Error(), true), true
	}
	if head.Index == nil {
		return policy.ReportState(&policy.Report{Updated: head.Updated, Nodes: head.Nodes}, now, s, "", false), false
	}
	shards := map[string]*report.Shard{}
	for _, obj := range doc.Shards {
		sh := report.DecodeShard(numbers(obj).(map[string]interface{}))
		shards[obj["metadata"].(map[string]interface{})["name"].(string)] = sh
	}
	nodes, problem := report.Gather(head.Index, shards, nil)
	if problem != "" {
		return policy.ReportState(nil, now, s, problem, false), false
	}
	return policy.ReportState(&policy.Report{Updated: head.Updated, Nodes: nodes}, now, s, "", false), false
}

// numbers types whole JSON numbers as int64, as unstructured objects from the API server hold them.
func numbers(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, item := range x {
			x[k] = numbers(item)
		}
	case []interface{}:
		for i, item := range x {
			x[i] = numbers(item)
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	}
	return v
}

func TestEveryCaseDecidesAsPython(t *testing.T) {
	tab := load(t)
	settings := settingsOf(t, tab)
	for r := range tab.Reports { // the documents once as JSON-decoded, once with int64 integers
		if tab.Reports[r].Status != nil && r%2 == 1 {
			numbers(tab.Reports[r].Status)
		}
	}
	for i, c := range tab.Cases {
		s := &settings[c.Settings]
		state, decoderWords := stateOf(tab, c.Report, c.Now, s)
		want := c.Expect
		fail := func(what string, got, expected interface{}) {
			t.Errorf("case %d (settings %d, report %d, now %v, pod %d, node %s, labels %d): %s: Go %#v, Python %#v",
				i, c.Settings, c.Report, c.Now, c.Pod, c.Node, c.Labels, what, got, expected)
		}
		if state.Fallback.String() != want.Fallback {
			fail("fallback", state.Fallback.String(), want.Fallback)
		}
		if want.Detail == nil && !decoderWords {
			fail("detail", "(Go decoded the document)", "(Python could not)")
		} else if want.Detail != nil && state.Detail != *want.Detail {
			fail("detail", state.Detail, *want.Detail)
		}
		if (want.Age == nil) == state.HasAge || (want.Age != nil && !same(state.Age, *want.Age)) {
			fail("age", state.Age, want.Age)
		}
		if state.OutdatedInUse != want.OutdatedInUse {
			fail("outdatedInUse", state.OutdatedInUse, want.OutdatedInUse)
		}
		pod := tab.Pods[c.Pod]
		runtimeClass := ""
		if pod.RuntimeClass != nil {
			runtimeClass = *pod.RuntimeClass
		}
		labels := tab.Labels[c.Labels]
		verdict := policy.FilterNode(&state, c.Node, labels, labels != nil, runtimeClass, s)
		if verdict.Passed != want.Passed || verdict.Rule.String() != want.Rule || verdict.Reason != want.Reason {
			fail("verdict", verdict, policy.Verdict{Passed: want.Passed, Reason: want.Reason + " (" + want.Rule + ")"})
		}
		var sensitivity *policy.Sensitivity
		if pod.SensitiveTo != nil && !state.BasicMode() {
			sensitivity, _ = policy.ParseSensitivity(*pod.SensitiveTo)
		}
		if got := policy.RawScore(&state, c.Node, s, sensitivity); !same(got, want.Raw) {
			fail("raw score", got, want.Raw)
		}
		if got := policy.FrameworkScore(&state, c.Node, s, sensitivity); got != want.Framework {
			fail("framework score", got, want.Framework)
		}
		if got := policy.VolcanoScore(&state, c.Node, s, sensitivity); !same(got, want.Volcano) {
			fail("volcano score", got, want.Volcano)
		}
		if got := policy.KubeExtenderScore(&state, c.Node, s, sensitivity); got != want.KubeExtender {
			fail("kube extender score", got, want.KubeExtender)
		}
	}
}

func TestSensitivityReadsAsPython(t *testing.T) {
	tab := load(t)
	for _, v := range tab.Sensitivity {
		got, err := policy.ParseSensitivity(v.Text)
		switch {
		case v.Error != nil && err == nil:
			t.Errorf("%q: Go read %+v, Python: %s", v.Text, got, *v.Error)
		case v.Error != nil && err.Error() != *v.Error:
			t.Errorf("%q: Go says %q, Python %q", v.Text, err.Error(), *v.Error)
		case v.Error == nil && err != nil:
			t.Errorf("%q: Go says %q, Python read %v", v.Text, err.Error(), v.Weights)
		case v.Error == nil:
			if len(got.Weights) != len(v.Weights) {
				t.Errorf("%q: Go %+v, Python %v", v.Text, got.Weights, v.Weights)
				continue
			}
			for k, w := range v.Weights {
				if got.Weights[k].Name != w[0].(string) || !same(got.Weights[k].Weight, w[1].(float64)) {
					t.Errorf("%q: Go %+v, Python %v", v.Text, got.Weights, v.Weights)
				}
			}
		}
	}
}
