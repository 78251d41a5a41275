// SPDX-License-Identifier: MulanPSL-2.0

package report

import (
	"testing"

	"mco.many-core.io/scheduler/policy"
)

// A new report object over the same shard objects reuses the merged entries; a changed shard
// makes them again.
func TestGatherReusesTheEntriesOfUnchangedShards(t *testing.T) {
	shard := func(k int, names ...string) *Shard {
		nodes := map[string]*policy.Node{}
		for _, n := range names {
			nodes[n] = &policy.Node{Level: policy.LevelLow, Score: 30}
		}
		return &Shard{Report: "cluster", Generation: 4, Index: k, Count: 2, Version: 1, Nodes: nodes}
	}
	a, b := shard(0, "n1"), shard(1, "n2", "n3")
	index := &Index{Generation: 4, Count: 2, Versions: []int64{1, 1}, Changes: map[string]*policy.Node{}}
	first, problem := Gather(index, map[string]*Shard{"a": a, "b": b}, nil)
	if problem != "" || first.Len() != 3 {
		t.Fatalf("%q, %d nodes", problem, first.Len())
	}
	changed := &Index{Generation: 4, Count: 2, Versions: []int64{1, 1}, Changes: map[string]*policy.Node{
		"n2": {Level: policy.LevelHigh, Score: 90}, "n1": nil,
	}}
	second, _ := Gather(changed, map[string]*Shard{"a": a, "b": b}, first)
	if len(second.all) != 3 || !sameMap(first.all, second.all) {
		t.Error("the same shards: the merged entries were made again")
	}
	if second.Get("n2").Level != policy.LevelHigh || second.Get("n1") != nil || second.Len() != 2 {
		t.Errorf("changes not laid over: n2 %+v, n1 %+v, %d nodes", second.Get("n2"), second.Get("n1"), second.Len())
	}
	third, _ := Gather(index, map[string]*Shard{"a": a, "b": shard(1, "n2")}, second)
	if sameMap(second.all, third.all) || third.Len() != 2 || third.Get("n3") != nil {
		t.Errorf("a changed shard: the merged entries were reused (%d nodes)", third.Len())
	}
}

func sameMap(a, b map[string]*policy.Node) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for k := range a { // maps are references: adding to one shows in the other only if they are one
		a[k+"\x00probe"] = nil
		_, shared := b[k+"\x00probe"]
		delete(a, k+"\x00probe")
		return shared
	}
	return false
}
