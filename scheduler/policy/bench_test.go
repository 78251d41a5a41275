// SPDX-License-Identifier: MulanPSL-2.0

package policy_test

import (
	"strconv"
	"testing"

	"mco.many-core.io/scheduler/policy"
)

// The per-(pod, node) cost of the plugins' decisions, on a 15,000-node report
// (docs/benchmarks.md, "Scheduling with the real schedulers"): go test -bench . ./policy

func benchState(b *testing.B, nodes int) (policy.State, policy.Settings, []string) {
	b.Helper()
	settings := policy.DefaultSettings()
	io, _ := policy.SignalIndex("psiIoSomeAvg10")
	m := make(policy.NodeMap, nodes)
	names := make([]string, nodes)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
		n := &policy.Node{Level: policy.LevelLow, Score: float64(i % 60), Dimensions: []policy.Dimension{{Name: "cpu", Score: 30}, {Name: "io", Score: float64(i % 40)}}}
		n.SetSignal(io, float64(i%25))
		m[names[i]] = n
	}
	return policy.ReportState(&policy.Report{Updated: 1000, Nodes: m}, 1001, &settings, "", false), settings, names
}

func BenchmarkFilterNode(b *testing.B) {
	state, settings, names := benchState(b, 15000)
	labels := map[string]string{"kubernetes.io/hostname": "x"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		policy.FilterNode(&state, names[i%len(names)], labels, true, "", &settings)
	}
}

func BenchmarkVolcanoScore(b *testing.B) {
	state, settings, names := benchState(b, 15000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		policy.VolcanoScore(&state, names[i%len(names)], &settings, nil)
	}
}

func BenchmarkVolcanoScoreSensitive(b *testing.B) {
	state, settings, names := benchState(b, 15000)
	sensitivity, err := policy.ParseSensitivity("io=2,cpu")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		policy.VolcanoScore(&state, names[i%len(names)], &settings, sensitivity)
	}
}
