// SPDX-License-Identifier: MulanPSL-2.0

package report_test

import (
	"reflect"
	"strconv"
	"testing"

	"mco.many-core.io/scheduler/policy"
	"mco.many-core.io/scheduler/report"
)

func TestShardIndexOfIsPythonCRC32(t *testing.T) {
	// zlib.crc32(name.encode()) & (count - 1), computed with Python.
	for _, c := range []struct {
		name  string
		count int
		want  int
	}{
		{"node-1", 8, 7},
		{"node-2", 8, 5},
		{"worker-17", 16, 10},
		{"a", 2, 1},
		{"cluster-node-0003", 1024, 198},
		{"", 4, 0},
		{"节点", 64, 11},
		{"anything", 1, 0},
	} {
		if got := report.ShardIndexOf(c.name, c.count); got != c.want {
			t.Errorf("ShardIndexOf(%q, %d) = %d, want %d", c.name, c.count, got, c.want)
		}
	}
}

// Where Python's crc32 puts these names among 4 shards.
var inShard = [4][]string{{"n1", "n3"}, {"n5", "gone"}, {"n0", "changed"}, {"n4"}}

// decodedShard is shard k of generation gen among count, written at version, holding names (each
// with psiIoSomeAvg10 and an io dimension).
func decodedShard(t *testing.T, gen int64, k, count int, version int64, names ...string) *report.Shard {
	t.Helper()
	nodes := map[string]interface{}{}
	for _, name := range names {
		nodes[name] = map[string]interface{}{
			"name": name, "level": "Low", "score": int64(20),
			"dimensions": map[string]interface{}{"io": map[string]interface{}{"level": "Low", "score": int64(20)}},
			"signals":    map[string]interface{}{"psiIoSomeAvg10": 7.5},
		}
	}
	name := "cluster-" + strconv.FormatInt(gen, 10) + "-" + strconv.Itoa(k)
	spec := map[string]interface{}{"report": "cluster", "generation": gen, "index": int64(k), "count": int64(count)}
	s := report.DecodeShard(shardObject(name, spec, map[string]interface{}{"version": version, "nodes": nodes}))
	if s.Problem != "" {
		t.Fatal(s.Problem)
	}
	return s
}

// generation is every shard of inShard for gen, at version 1.
func generation(t *testing.T, gen int64) map[string]*report.Shard {
	out := map[string]*report.Shard{}
	for k, names := range inShard {
		s := decodedShard(t, gen, k, 4, 1, names...)
		out["cluster-"+strconv.FormatInt(gen, 10)+"-"+strconv.Itoa(k)] = s
	}
	return out
}

func index(gen int64, versions []int64, changes map[string]*policy.Node) *report.Index {
	return &report.Index{Generation: gen, Count: len(versions), Versions: versions, Changes: changes}
}

func TestGatherWholeGeneration(t *testing.T) {
	shards := generation(t, 2)
	changes := map[string]*policy.Node{
		"changed": {Level: policy.LevelHigh, Score: 91.5},
		"gone":    nil,
		"fresh":   {Level: policy.LevelMedium, Score: 60},
		"ghost":   nil, // gone, and in no shard either
	}
	nodes, problem := report.Gather(index(2, []int64{1, 1, 1, 1}, changes), shards, nil)
	if problem != "" {
		t.Fatal(problem)
	}
	// 7 in the shards, "gone" removed, "fresh" added.
	if nodes.Len() != 7 {
		t.Errorf("Len %d, want 7", nodes.Len())
	}
	for _, name := range []string{"n0", "n1", "n3", "n4", "n5"} {
		if got, want := nodes.Get(name), shards["cluster-2-"+strconv.Itoa(report.ShardIndexOf(name, 4))].Nodes[name]; got != want || got == nil {
			t.Errorf("%s: %+v, want its shard's entry %+v", name, got, want)
		}
	}
	changed := nodes.Get("changed")
	if changed == nil || changed.Level != policy.LevelHigh || changed.Score != 91.5 || changed.Dimensions != nil {
		t.Errorf("changed: %+v, want High 91.5 without dimensions", changed)
	}
	io, _ := policy.SignalIndex("psiIoSomeAvg10")
	if v, ok := changed.Signal(io); !ok || v != 7.5 {
		t.Errorf("changed lost its shard's signals: %v %v", v, ok)
	}
	if held := shards["cluster-2-2"].Nodes["changed"]; held.Level != policy.LevelLow || len(held.Dimensions) != 1 {
		t.Errorf("laying a change over an entry changed the shard's entry: %+v", held)
	}
	if nodes.Get("gone") != nil || nodes.Get("ghost") != nil {
		t.Error("a node changed to null is still there")
	}
	if fresh := nodes.Get("fresh"); fresh == nil || fresh.Level != policy.LevelMedium || fresh.Score != 60 {
		t.Errorf("fresh: %+v", fresh)
	}
	if nodes.Get("n99") != nil {
		t.Error("a node in no shard is there")
	}
}

func TestGatherWithoutChanges(t *testing.T) {
	nodes, problem := report.Gather(index(2, []int64{1, 0, 1, 1}, nil), generation(t, 2), nil)
	if problem != "" || nodes.Len() != 7 {
		t.Fatalf("problem %q, %d nodes", problem, nodes.Len())
	}
}

func TestGatherIncomplete(t *testing.T) {
	behind := generation(t, 5)
	behind["cluster-5-2"] = decodedShard(t, 5, 2, 4, 1, inShard[2]...)
	delete(behind, "cluster-5-3")
	unwritten := generation(t, 5)
	unwritten["cluster-5-1"] = report.DecodeShard(shardObject("cluster-5-1",
		map[string]interface{}{"report": "cluster", "generation": int64(5), "index": int64(1), "count": int64(4)}, nil))
	cases := []struct {
		name     string
		versions []int64
		shards   map[string]*report.Shard
		want     string
	}{
		{"one behind, one missing", []int64{1, 1, 2, 1}, behind,
			"report generation 5 is incomplete: 2 of 4 shards missing or older than the report names (2, 3); the analyzer may be writing them"},
		{"created, not written", []int64{1, 1, 1, 1}, unwritten,
			"report generation 5 is incomplete: 1 of 4 shards missing or older than the report names (1); the analyzer may be writing them"},
		{"none", make([]int64, 16), nil,
			"report generation 5 is incomplete: 16 of 16 shards missing or older than the report names (0, 1, 2, 3, 4, 5, 6, 7, ...); the analyzer may be writing them"},
		{"only another generation's", []int64{1, 1, 1, 1}, generation(t, 4),
			"report generation 5 is incomplete: 4 of 4 shards missing or older than the report names (0, 1, 2, 3); the analyzer may be writing them"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodes, problem := report.Gather(index(5, c.versions, nil), c.shards, nil)
			if nodes != nil || problem != c.want {
				t.Errorf("nodes %v, problem\n %q\nwant\n %q", nodes, problem, c.want)
			}
		})
	}
}

func TestGatherBadShard(t *testing.T) {
	shards := generation(t, 2)
	spec := map[string]interface{}{"report": "cluster", "generation": int64(2), "index": int64(1), "count": int64(4)}
	bad := report.DecodeShard(shardObject("cluster-2-1", spec, map[string]interface{}{
		"version": int64(9), "nodes": map[string]interface{}{"n5": map[string]interface{}{"name": "n5", "level": "Bad", "score": int64(1)}},
	}))
	shards["cluster-2-1"] = bad
	nodes, problem := report.Gather(index(2, []int64{1, 1, 1, 1}, nil), shards, nil)
	if nodes != nil || problem != bad.Problem || problem == "" {
		t.Errorf("nodes %v, problem %q, want %q", nodes, problem, bad.Problem)
	}
	// The same bad shard in another generation is not this generation's problem.
	nodes, problem = report.Gather(index(3, []int64{1, 1, 1, 1}, nil), mergeShards(generation(t, 3), map[string]*report.Shard{"cluster-2-1": bad}), nil)
	if problem != "" || nodes.Len() != 7 {
		t.Errorf("problem %q from another generation", problem)
	}
}

func TestGatherIgnoresOtherGenerations(t *testing.T) {
	old := map[string]*report.Shard{
		// Generation 1, with more nodes and newer versions: none of it may show.
		"cluster-1-0": decodedShard(t, 1, 0, 4, 9, "n1", "n3", "n8"),
		// Generation 2 among 2 shards: another layout.
		"cluster-2-0-of-2": decodedShard(t, 2, 0, 2, 9, "n0", "n2"),
	}
	nodes, problem := report.Gather(index(2, []int64{1, 1, 1, 1}, nil), mergeShards(generation(t, 2), old), nil)
	if problem != "" {
		t.Fatal(problem)
	}
	if nodes.Len() != 7 || nodes.Get("n8") != nil {
		t.Errorf("Len %d, n8 %+v", nodes.Len(), nodes.Get("n8"))
	}
	var names []string
	for _, names4 := range inShard {
		names = append(names, names4...)
	}
	for _, name := range names {
		if nodes.Get(name) == nil {
			t.Errorf("%s missing", name)
		}
	}
	if got := nodes.Get("n1"); !reflect.DeepEqual(got, generation(t, 2)["cluster-2-0"].Nodes["n1"]) {
		t.Errorf("n1 %+v", got)
	}
}

func mergeShards(maps ...map[string]*report.Shard) map[string]*report.Shard {
	out := map[string]*report.Shard{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
