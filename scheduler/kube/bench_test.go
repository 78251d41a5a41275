// SPDX-License-Identifier: MulanPSL-2.0

package kube

import (
	"context"
	"strconv"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/policy"
)

// BenchmarkPodCycle is the plugin's share of one pod's cycle over 1,000 nodes: PreFilter, Filter
// and Score on each, PreScore and NormalizeScore once (go test -bench PodCycle ./kube); with the
// herd guard off, and on with two placements held on every node.
func BenchmarkPodCycle(b *testing.B) {
	b.Run("guard=off", func(b *testing.B) { benchmarkPodCycle(b, false) })
	b.Run("guard=on", func(b *testing.B) { benchmarkPodCycle(b, true) })
}

func benchmarkPodCycle(b *testing.B, guard bool) {
	a := args.Defaults()
	a.Settings.Herd.Enabled = guard
	io, _ := policy.SignalIndex("psiIoSomeAvg10")
	nodes := make(policy.NodeMap, 1000)
	names := make([]string, 1000)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
		n := &policy.Node{Level: policy.LevelLow, Score: float64(i % 60)}
		n.SetSignal(io, float64(i%7))
		nodes[names[i]] = n
	}
	settings := a.Settings
	state := policy.ReportState(&policy.Report{Updated: now - 1, Nodes: nodes}, now, &settings, "", false)
	p := &Plugin{shared: core.New(), args: a, clock: func() time.Time { return time.UnixMicro(int64(now * 1e6)) }}
	cpu := policy.Load{Weights: []policy.Weight{{Name: "cpu", Weight: 1}}}
	for i, name := range names {
		p.shared.Place(&a.Settings.Herd, name, "a"+strconv.Itoa(i), cpu, now)
		p.shared.Place(&a.Settings.Herd, name, "b"+strconv.Itoa(i), policy.Load{All: true}, now)
	}
	p.look = func(policy.Settings) core.View { return core.View{State: state, Settings: &settings} }
	infos := nodeInfos(names...)
	ctx, target := context.Background(), pod("", "")
	scores := make(framework.NodeScoreList, len(infos))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cycle := framework.NewCycleState()
		p.PreFilter(ctx, cycle, target, infos)
		for _, n := range infos {
			p.Filter(ctx, cycle, target, n)
		}
		p.PreScore(ctx, cycle, target, infos)
		for k, n := range infos {
			scores[k].Score, _ = p.Score(ctx, cycle, target, n)
		}
		p.NormalizeScore(ctx, cycle, target, scores)
	}
}
