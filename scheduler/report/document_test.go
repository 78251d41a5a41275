// SPDX-License-Identifier: MulanPSL-2.0

package report_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"mco.many-core.io/scheduler/policy"
	"mco.many-core.io/scheduler/report"
)

// object decodes JSON as encoding/json does (every number float64).
func object(t *testing.T, text string) map[string]interface{} {
	t.Helper()
	out := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("json %s: %v", text, err)
	}
	return out
}

func signalOf(t *testing.T, node *policy.Node, name string) (float64, bool) {
	t.Helper()
	i, ok := policy.SignalIndex(name)
	if !ok {
		t.Fatalf("no signal %s", name)
	}
	return node.Signal(i)
}

// entry is a valid inline entry; change edits it before it is put in a status.
func entry(change func(map[string]interface{})) map[string]interface{} {
	e := map[string]interface{}{
		"name":           "n1",
		"level":          "Medium",
		"score":          int64(55),
		"dominant":       "io",
		"dimensions":     map[string]interface{}{"io": map[string]interface{}{"level": "Medium", "score": 55.5}},
		"signals":        map[string]interface{}{"psiIoSomeAvg10": 12.5},
		"lastSampleTime": "2025-01-02T03:04:00Z",
		"reasons":        []interface{}{"io pressure"},
	}
	if change != nil {
		change(e)
	}
	return e
}

func status(nodes ...interface{}) map[string]interface{} {
	return map[string]interface{}{"lastUpdateTime": "2025-01-02T03:04:05.123456Z", "nodes": nodes}
}

func TestDecodeStatusInline(t *testing.T) {
	head, err := report.DecodeStatus(status(
		entry(func(e map[string]interface{}) { e["name"], e["score"] = "dup", int64(10) }),
		entry(nil),
		entry(func(e map[string]interface{}) {
			e["name"], e["level"], e["score"] = "dup", "High", 90.25
			e["signals"] = map[string]interface{}{"psiIoSomeAvg10": int64(40), "psiCpuSomeAvg10": 3.5, "someFutureSignal": int64(1)}
			delete(e, "dimensions")
		}),
	))
	if err != nil {
		t.Fatal(err)
	}
	if head.Updated != 1735787045.123456 {
		t.Errorf("Updated %v", head.Updated)
	}
	if head.Index != nil || head.Nodes.Len() != 2 {
		t.Fatalf("index %v, %d nodes", head.Index, head.Nodes.Len())
	}
	n1 := head.Nodes.Get("n1")
	if n1.Level != policy.LevelMedium || n1.Score != 55 {
		t.Errorf("n1 %+v", n1)
	}
	if n1.Sampled != 1735787040 { // lastSampleTime: the herd guard's reference
		t.Errorf("n1 sampled %v", n1.Sampled)
	}
	if want := []policy.Dimension{{Name: "io", Score: 55.5}}; !reflect.DeepEqual(n1.Dimensions, want) {
		t.Errorf("n1 dimensions %v", n1.Dimensions)
	}
	if v, ok := signalOf(t, n1, "psiIoSomeAvg10"); !ok || v != 12.5 {
		t.Errorf("n1 psiIoSomeAvg10 %v %v", v, ok)
	}
	if _, ok := signalOf(t, n1, "psiCpuSomeAvg10"); ok {
		t.Error("n1 has a signal it was not given")
	}
	dup := head.Nodes.Get("dup") // the last entry of a name wins
	if dup.Level != policy.LevelHigh || dup.Score != 90.25 || len(dup.Dimensions) != 0 {
		t.Errorf("dup %+v", dup)
	}
	if v, _ := signalOf(t, dup, "psiIoSomeAvg10"); v != 40 {
		t.Errorf("dup psiIoSomeAvg10 %v", v)
	}
	if v, _ := signalOf(t, dup, "psiCpuSomeAvg10"); v != 3.5 {
		t.Errorf("dup psiCpuSomeAvg10 %v", v)
	}
}

func TestDecodeStatusFromJSON(t *testing.T) {
	head, err := report.DecodeStatus(object(t, `{"lastUpdateTime": "2025-01-02T03:04:05+02:00",
		"nodes": [{"name": "a", "level": "Low", "score": 20, "dimensions": {"cpu": {"level": "Low", "score": 20}}},
		          {"name": "b", "level": "Unknown", "score": 0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if head.Updated != 1735779845 || head.Nodes.Len() != 2 || head.Nodes.Get("b").Level != policy.LevelUnknown {
		t.Errorf("head %+v", head)
	}
}

func TestDecodeStatusEmptyNodes(t *testing.T) {
	for _, raw := range []map[string]interface{}{
		{"lastUpdateTime": "2025-01-02T03:04:05Z"},
		{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": nil},
		{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": []interface{}{}, "shards": nil},
		{"lastUpdateTime": "2025-01-02T03:04:05Z", "shards": map[string]interface{}{"generation": int64(0), "count": int64(0), "versions": []interface{}{}}},
	} {
		head, err := report.DecodeStatus(raw)
		if err != nil || head.Index != nil || head.Nodes == nil || head.Nodes.Len() != 0 {
			t.Errorf("%v: head %+v, err %v", raw, head, err)
		}
	}
}

func TestDecodeStatusNamesTheBadField(t *testing.T) {
	long := strings.Repeat("x", 513)
	cases := []struct {
		name string
		raw  map[string]interface{}
		path string
	}{
		{"score above 100", status(entry(func(e map[string]interface{}) { e["score"] = int64(101) })), "status.nodes[0].score"},
		{"score negative", status(entry(func(e map[string]interface{}) { e["score"] = -0.5 })), "status.nodes[0].score"},
		{"score a string", status(entry(func(e map[string]interface{}) { e["score"] = "50" })), "status.nodes[0].score"},
		{"score missing", status(entry(func(e map[string]interface{}) { delete(e, "score") })), "status.nodes[0].score"},
		{"level Bad", status(entry(nil), entry(func(e map[string]interface{}) { e["level"] = "Bad" })), "status.nodes[1].level"},
		{"level lower case", status(entry(func(e map[string]interface{}) { e["level"] = "high" })), "status.nodes[0].level"},
		{"name missing", status(entry(func(e map[string]interface{}) { delete(e, "name") })), "status.nodes[0].name"},
		{"name empty", status(entry(func(e map[string]interface{}) { e["name"] = "" })), "status.nodes[0].name"},
		{"name too long", status(entry(func(e map[string]interface{}) { e["name"] = strings.Repeat("n", 254) })), "status.nodes[0].name"},
		{"entry not an object", status("n1"), "status.nodes[0]"},
		{"dimension level Unknown", status(entry(func(e map[string]interface{}) {
			e["dimensions"] = map[string]interface{}{"cpu": map[string]interface{}{"level": "Unknown", "score": int64(1)}}
		})), "status.nodes[0].dimensions.cpu.level"},
		{"dimension score above 100", status(entry(func(e map[string]interface{}) {
			e["dimensions"] = map[string]interface{}{"cpu": map[string]interface{}{"level": "High", "score": int64(200)}}
		})), "status.nodes[0].dimensions.cpu.score"},
		{"dimension not an object", status(entry(func(e map[string]interface{}) {
			e["dimensions"] = map[string]interface{}{"cpu": "High"}
		})), "status.nodes[0].dimensions.cpu"},
		{"too many dimensions", status(entry(func(e map[string]interface{}) {
			dims := map[string]interface{}{}
			for i := 0; i < 9; i++ {
				dims["d"+strconv.Itoa(i)] = map[string]interface{}{"level": "Low", "score": int64(1)}
			}
			e["dimensions"] = dims
		})), "status.nodes[0].dimensions"},
		{"too many reasons", status(entry(func(e map[string]interface{}) {
			e["reasons"] = make([]interface{}, 33)
			for i := range e["reasons"].([]interface{}) {
				e["reasons"].([]interface{})[i] = "r"
			}
		})), "status.nodes[0].reasons"},
		{"reason too long", status(entry(func(e map[string]interface{}) { e["reasons"] = []interface{}{"ok", long} })), "status.nodes[0].reasons[1]"},
		{"reason not a string", status(entry(func(e map[string]interface{}) { e["reasons"] = []interface{}{int64(1)} })), "status.nodes[0].reasons[0]"},
		{"signal a string", status(entry(func(e map[string]interface{}) {
			e["signals"] = map[string]interface{}{"psiIoSomeAvg10": "12"}
		})), "status.nodes[0].signals.psiIoSomeAvg10"},
		{"signals a list", status(entry(func(e map[string]interface{}) { e["signals"] = []interface{}{} })), "status.nodes[0].signals"},
		{"dominant too long", status(entry(func(e map[string]interface{}) { e["dominant"] = strings.Repeat("d", 33) })), "status.nodes[0].dominant"},
		{"lastSampleTime unparsable", status(entry(func(e map[string]interface{}) { e["lastSampleTime"] = "03:04" })), "status.nodes[0].lastSampleTime"},
		{"lastUpdateTime unparsable", map[string]interface{}{"lastUpdateTime": "yesterday"}, "status.lastUpdateTime"},
		{"lastUpdateTime without zone", map[string]interface{}{"lastUpdateTime": "2025-01-02T03:04:05"}, "status.lastUpdateTime"},
		{"lastUpdateTime missing", map[string]interface{}{"nodes": []interface{}{}}, "status.lastUpdateTime"},
		{"nodes not a list", map[string]interface{}{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": map[string]interface{}{}}, "status.nodes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			head, err := report.DecodeStatus(c.raw)
			if err == nil {
				t.Fatalf("accepted: %+v", head)
			}
			if !strings.HasPrefix(err.Error(), c.path+": ") {
				t.Errorf("error %q does not name %s", err, c.path)
			}
		})
	}
}

func TestDecodeStatusIgnoresUnknownSignals(t *testing.T) {
	head, err := report.DecodeStatus(status(entry(func(e map[string]interface{}) {
		e["signals"] = map[string]interface{}{"gpuThrottle": int64(9), "oomKills": int64(2)}
	})))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := signalOf(t, head.Nodes.Get("n1"), "oomKills"); !ok || v != 2 {
		t.Errorf("oomKills %v %v", v, ok)
	}
}

func shardIndex(fields map[string]interface{}) map[string]interface{} {
	index := map[string]interface{}{
		"generation": int64(7),
		"count":      int64(4),
		"versions":   []interface{}{int64(1), 2.0, int64(3), int64(0)},
		"changes":    map[string]interface{}{"a": "High 91.5 io", "b": "Medium 60", "c": nil},
	}
	for k, v := range fields {
		index[k] = v
	}
	return map[string]interface{}{"lastUpdateTime": "2025-01-02T03:04:05Z", "shards": index, "nodes": []interface{}{entry(nil)}}
}

func TestDecodeStatusShardIndex(t *testing.T) {
	head, err := report.DecodeStatus(shardIndex(nil))
	if err != nil {
		t.Fatal(err)
	}
	if head.Nodes != nil {
		t.Errorf("a sharded report has inline nodes %v", head.Nodes)
	}
	ix := head.Index
	if ix == nil || ix.Generation != 7 || ix.Count != 4 || !reflect.DeepEqual(ix.Versions, []int64{1, 2, 3, 0}) {
		t.Fatalf("index %+v", ix)
	}
	if a := ix.Changes["a"]; a == nil || a.Level != policy.LevelHigh || a.Score != 91.5 {
		t.Errorf("change a %+v", a)
	}
	if b := ix.Changes["b"]; b == nil || b.Level != policy.LevelMedium || b.Score != 60 {
		t.Errorf("change b %+v", b)
	}
	if c, ok := ix.Changes["c"]; !ok || c != nil {
		t.Errorf("change c %+v %v: want a node gone", c, ok)
	}
}

func TestDecodeStatusShardIndexRejects(t *testing.T) {
	cases := []struct {
		name   string
		fields map[string]interface{}
		path   string
	}{
		{"count not a power of two", map[string]interface{}{"count": int64(3), "versions": []interface{}{int64(1), int64(1), int64(1)}}, "status.shards.count"},
		{"count too large", map[string]interface{}{"count": int64(131072)}, "status.shards.count"},
		{"count negative", map[string]interface{}{"count": int64(-4)}, "status.shards.count"},
		{"count fractional", map[string]interface{}{"count": 4.5}, "status.shards.count"},
		{"count missing", map[string]interface{}{"count": nil}, "status.shards.count"},
		{"generation missing", map[string]interface{}{"generation": nil}, "status.shards.generation"},
		{"versions too short", map[string]interface{}{"versions": []interface{}{int64(1), int64(1)}}, "status.shards.versions"},
		{"versions too long", map[string]interface{}{"versions": []interface{}{int64(1), int64(1), int64(1), int64(1), int64(1)}}, "status.shards.versions"},
		{"versions missing", map[string]interface{}{"versions": nil}, "status.shards.versions"},
		{"version negative", map[string]interface{}{"versions": []interface{}{int64(1), int64(-1), int64(1), int64(1)}}, "status.shards.versions[1]"},
		{"version fractional", map[string]interface{}{"versions": []interface{}{int64(1), int64(1), 1.5, int64(1)}}, "status.shards.versions[2]"},
		{"changes a list", map[string]interface{}{"changes": []interface{}{}}, "status.shards.changes"},
		{"shards a list", nil, "status.shards"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := shardIndex(c.fields)
			if c.fields == nil {
				raw["shards"] = []interface{}{}
			}
			_, err := report.DecodeStatus(raw)
			if err == nil || !strings.HasPrefix(err.Error(), c.path+": ") {
				t.Errorf("error %v does not name %s", err, c.path)
			}
		})
	}
}

func TestChangeLines(t *testing.T) {
	good := []struct {
		line  string
		level policy.Level
		score float64
	}{
		{"High 91.5 io", policy.LevelHigh, 91.5},
		{"Medium 60", policy.LevelMedium, 60},
		{"None 0", policy.LevelNone, 0},
		{"Unknown 100", policy.LevelUnknown, 100},
	}
	for _, g := range good {
		node, err := report.ParseChange("a", g.line)
		if err != nil || node.Level != g.level || node.Score != g.score || node.Dimensions != nil {
			t.Errorf("%q: %+v, %v", g.line, node, err)
		}
	}
	bad := []interface{}{
		"High", "High 50 io extra", "Bad 50", "high 50", "High 101", "High -1", "High NaN", "High x", "High  50",
		"High " + strings.Repeat("9", 64), int64(50), nil, "",
	}
	for _, line := range bad {
		if node, err := report.ParseChange("a", line); err == nil {
			t.Errorf("%#v accepted: %+v", line, node)
		} else if !strings.HasPrefix(err.Error(), "status.shards.changes[a]: ") {
			t.Errorf("%#v: error %q does not name the change", line, err)
		}
	}
	// In a status, a bad line is the state's problem (as Python's assembler has it: a reader keeps
	// the last whole state), naming the node; the status itself reads.
	head, err := report.DecodeStatus(shardIndex(map[string]interface{}{"changes": map[string]interface{}{"n9": "Bad 50"}}))
	if err != nil || !strings.HasPrefix(head.Index.ChangeProblem, "status.shards.changes[n9]: ") {
		t.Errorf("bad change line in a status: %v, %+v", err, head)
	}
	if _, problem := report.Gather(head.Index, nil, nil); problem != head.Index.ChangeProblem {
		t.Errorf("Gather with a bad change line: %q", problem)
	}
}

func shardObject(name string, spec map[string]interface{}, st map[string]interface{}) map[string]interface{} {
	obj := map[string]interface{}{
		"apiVersion": "mco.many-core.io/v1alpha1",
		"kind":       "NodeInterferenceReportShard",
		"metadata":   map[string]interface{}{"name": name},
	}
	if spec != nil {
		obj["spec"] = spec
	}
	if st != nil {
		obj["status"] = st
	}
	return obj
}

func TestDecodeShard(t *testing.T) {
	spec := map[string]interface{}{"report": "cluster", "generation": int64(3), "index": int64(1), "count": int64(2)}
	shard := report.DecodeShard(shardObject("cluster-3-1", spec, map[string]interface{}{
		"version": int64(5),
		"nodes":   map[string]interface{}{"n1": entry(nil), "n2": entry(func(e map[string]interface{}) { e["name"] = "n2" })},
	}))
	if shard.Problem != "" {
		t.Fatal(shard.Problem)
	}
	if shard.Report != "cluster" || shard.Generation != 3 || shard.Index != 1 || shard.Count != 2 || shard.Version != 5 || len(shard.Nodes) != 2 {
		t.Errorf("shard %+v", shard)
	}
	if n := shard.Nodes["n2"]; n == nil || n.Score != 55 {
		t.Errorf("n2 %+v", n)
	}
	for name, st := range map[string]map[string]interface{}{
		"no status":  nil,
		"nodes null": {"version": int64(4), "nodes": nil},
	} {
		shard := report.DecodeShard(shardObject("cluster-3-1", spec, st))
		if shard.Problem != "" || shard.Version != 0 || shard.Nodes != nil || shard.Generation != 3 {
			t.Errorf("%s: shard %+v: want version 0, no problem", name, shard)
		}
	}
}

func TestDecodeShardProblems(t *testing.T) {
	spec := func(change map[string]interface{}) map[string]interface{} {
		s := map[string]interface{}{"report": "cluster", "generation": int64(3), "index": int64(1), "count": int64(2)}
		for k, v := range change {
			s[k] = v
		}
		return s
	}
	nodes := func(e interface{}) map[string]interface{} {
		return map[string]interface{}{"version": int64(1), "nodes": map[string]interface{}{"n1": e}}
	}
	cases := []struct {
		name     string
		spec     map[string]interface{}
		status   map[string]interface{}
		problem  string
		readable bool // the spec was read: the shard keeps its generation and index
	}{
		{"spec missing", nil, nil, "NodeInterferenceReportShard s: spec: ", false},
		{"generation missing", spec(map[string]interface{}{"generation": nil}), nil, "NodeInterferenceReportShard s: spec.generation: ", false},
		{"index negative", spec(map[string]interface{}{"index": int64(-1)}), nil, "NodeInterferenceReportShard s: spec.index: ", false},
		{"count 0", spec(map[string]interface{}{"count": int64(0)}), nil, "NodeInterferenceReportShard s: spec.count: ", false},
		{"bad entry", spec(nil), nodes(entry(func(e map[string]interface{}) { e["score"] = int64(101) })),
			"NodeInterferenceReportShard s: status.nodes[n1].score: ", true},
		{"entry not an object", spec(nil), nodes("n1"), "NodeInterferenceReportShard s: status.nodes[n1]: ", true},
		{"nodes a list", spec(nil), map[string]interface{}{"version": int64(1), "nodes": []interface{}{}}, "NodeInterferenceReportShard s: status.nodes: ", true},
		{"version missing", spec(nil), map[string]interface{}{"nodes": map[string]interface{}{}}, "NodeInterferenceReportShard s: status.version: ", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shard := report.DecodeShard(shardObject("s", c.spec, c.status))
			if !strings.HasPrefix(shard.Problem, c.problem) {
				t.Errorf("problem %q, want it to start %q", shard.Problem, c.problem)
			}
			if len(shard.Nodes) != 0 || shard.Version != 0 {
				t.Errorf("a bad shard has nodes %v, version %d", shard.Nodes, shard.Version)
			}
			if readable := shard.Generation == 3 && shard.Index == 1; readable != c.readable {
				t.Errorf("generation %d index %d", shard.Generation, shard.Index)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	for text, want := range map[string]float64{
		"2025-01-02T03:04:05Z":         1735787045,
		"2025-01-02T03:04:05.123456Z":  1735787045.123456,
		"2025-01-02T03:04:05.1234569Z": 1735787045.123456, // whole microseconds
		"2025-01-02T03:04:05+02:00":    1735779845,
		"1970-01-01T00:00:00Z":         0,
		"2025-01-02T03:04:05.5-01:30":  1735792445.5,
	} {
		if got, err := report.ParseTime(text); err != nil || got != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"", "2025-01-02", "2025-01-02 03:04:05Z", "2025-13-02T03:04:05Z"} {
		if _, err := report.ParseTime(text); err == nil {
			t.Errorf("ParseTime(%q) accepted", text)
		}
	}
}
