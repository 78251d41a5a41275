// SPDX-License-Identifier: MulanPSL-2.0

// Package report reads the NodeInterferenceReport and its shards (plain JSON data, as informers
// hold them) into what the policy needs. The document is mco_py/report/document.py's (the CRD
// schemas are the contract); a sharded report is put together as mco_py/report/assemble.py does
// it. Pure: no Kubernetes client (package source watches the objects).
package report

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"mco.many-core.io/scheduler/policy"
)

// API identity of the report and its shards.
const (
	Group         = "mco.many-core.io"
	Version       = "v1alpha1"
	Plural        = "nodeinterferencereports"
	ShardPlural   = "nodeinterferencereportshards"
	ReportLabel   = "mco.many-core.io/report"
	maxEntries    = 20000
	maxShards     = 65536
	maxDimensions = 8
	maxReasons    = 32
	maxReasonLen  = 512
	maxName       = 253
	maxDominant   = 32
	maxChangeLen  = 64
)

// Head is a report object's status as a reader holds it: its time, and its entries or its shard
// index. Never changed once made.
type Head struct {
	// Updated is status.lastUpdateTime, seconds since the epoch.
	Updated float64
	// Nodes are the inline entries (nil when the report is sharded).
	Nodes policy.NodeMap
	// Index is the shard index; nil for an inline report.
	Index *Index
}

// Index is status.shards: the generation readers serve, its shard count, the version each shard
// must have reached, and the level changes not yet in the shards (nil: the node is gone).
type Index struct {
	Generation int64
	Count      int
	Versions   []int64
	Changes    map[string]*policy.Node
	// ChangeProblem says why a change line cannot be read: the state is then not served (a
	// reader keeps the last whole one), as a generation not yet whole.
	ChangeProblem string
}

// Shard is one NodeInterferenceReportShard as a reader holds it.
type Shard struct {
	Report     string
	Generation int64
	Index      int
	Count      int
	// Version is status.version; 0 for a shard created and not written yet.
	Version int64
	Nodes   map[string]*policy.Node
	// Problem says why the shard could not be read (its Nodes are then empty).
	Problem string
}

type path []string

func (p path) String() string { return strings.Join(p, "") }

func at(p path, part string) path {
	out := make(path, len(p), len(p)+1)
	copy(out, p)
	return append(out, part)
}

func fail(p path, format string, args ...interface{}) error {
	return fmt.Errorf("%s: %s", p.String(), fmt.Sprintf(format, args...))
}

// DecodeStatus reads a report object's status (plain JSON data, as unstructured objects hold it).
func DecodeStatus(raw map[string]interface{}) (*Head, error) {
	p := path{"status"}
	stamp, ok := raw["lastUpdateTime"].(string)
	if !ok {
		return nil, fail(at(p, ".lastUpdateTime"), "expected an RFC 3339 time")
	}
	updated, err := ParseTime(stamp)
	if err != nil {
		return nil, fail(at(p, ".lastUpdateTime"), "%v", err)
	}
	head := &Head{Updated: updated}
	if shards, present := raw["shards"]; present && shards != nil {
		index, err := decodeIndex(shards, at(p, ".shards"))
		if err != nil {
			return nil, err
		}
		if index.Count > 0 {
			head.Index = index
		}
	}
	nodes, _ := raw["nodes"].([]interface{})
	if raw["nodes"] != nil && nodes == nil {
		return nil, fail(at(p, ".nodes"), "expected a list")
	}
	if head.Index == nil {
		head.Nodes = make(policy.NodeMap, len(nodes))
		for i, item := range nodes {
			where := at(p, ".nodes["+strconv.Itoa(i)+"]")
			obj, isObj := item.(map[string]interface{})
			if !isObj {
				return nil, fail(where, "expected an object")
			}
			name, node, err := decodeEntry(obj, where)
			if err != nil {
				return nil, err
			}
			head.Nodes[name] = node // the last entry wins on duplicates
		}
	}
	return head, nil
}

func decodeIndex(raw interface{}, p path) (*Index, error) {
	obj, ok := raw.(map[string]interface{})
	if !ok {
		return nil, fail(p, "expected an object")
	}
	generation, err := count(obj, "generation", p, true)
	if err != nil {
		return nil, err
	}
	n, err := count(obj, "count", p, true)
	if err != nil {
		return nil, err
	}
	if n > maxShards || n&(n-1) != 0 {
		return nil, fail(at(p, ".count"), "must be 0 or a power of two up to %d, not %d", maxShards, n)
	}
	index := &Index{Generation: generation, Count: int(n)}
	versions, _ := obj["versions"].([]interface{})
	if len(versions) != index.Count {
		return nil, fail(at(p, ".versions"), "must hold %d versions, one per shard", index.Count)
	}
	index.Versions = make([]int64, len(versions))
	for i, v := range versions {
		value, ok := whole(v)
		if !ok || value < 0 {
			return nil, fail(at(p, ".versions["+strconv.Itoa(i)+"]"), "expected an integer >= 0")
		}
		index.Versions[i] = value
	}
	changes, _ := obj["changes"].(map[string]interface{})
	if obj["changes"] != nil && changes == nil {
		return nil, fail(at(p, ".changes"), "expected an object")
	}
	index.Changes = make(map[string]*policy.Node, len(changes))
	for name, line := range changes {
		if line == nil {
			index.Changes[name] = nil
			continue
		}
		node, err := ParseChange(name, line)
		if err != nil {
			if index.ChangeProblem == "" || err.Error() < index.ChangeProblem {
				index.ChangeProblem = err.Error() // the same one whatever the map's order
			}
			continue
		}
		index.Changes[name] = node
	}
	return index, nil
}

// ParseChange reads a changes line: "<level> <score> [dominant]".
func ParseChange(name string, raw interface{}) (*policy.Node, error) {
	text, _ := raw.(string)
	parts := strings.Split(text, " ")
	bad := func(why string) error {
		return fmt.Errorf("status.shards.changes[%s]: %q: %s", name, text, why)
	}
	if _, isText := raw.(string); !isText || len(text) > maxChangeLen || (len(parts) != 2 && len(parts) != 3) {
		return nil, bad(`expected "<level> <score> [dominant]"`)
	}
	level, ok := policy.ParseLevel(parts[0])
	if !ok {
		return nil, bad("unknown level " + parts[0])
	}
	score, ok := policy.ParseFloat(parts[1])
	if !ok || !(score >= 0 && score <= 100) {
		return nil, bad("score must be 0-100")
	}
	return &policy.Node{Level: level, Score: score}, nil
}

// DecodeShard reads a NodeInterferenceReportShard object; a bad one comes back with its Problem set.
func DecodeShard(obj map[string]interface{}) *Shard {
	name := ""
	if meta, ok := obj["metadata"].(map[string]interface{}); ok {
		name, _ = meta["name"].(string)
	}
	shard := &Shard{Generation: -1, Index: -1}
	spec, _ := obj["spec"].(map[string]interface{})
	p := path{"spec"}
	var err error
	if spec == nil {
		err = fail(p, "expected an object")
	}
	var generation, index, n int64
	if err == nil {
		generation, err = count(spec, "generation", p, true)
	}
	if err == nil {
		index, err = count(spec, "index", p, true)
	}
	if err == nil {
		n, err = count(spec, "count", p, true)
		if err == nil && (n < 1 || n > maxShards) {
			err = fail(at(p, ".count"), "must be 1-%d", maxShards)
		}
	}
	if err != nil {
		shard.Problem = "NodeInterferenceReportShard " + name + ": " + err.Error()
		return shard
	}
	shard.Report, _ = spec["report"].(string)
	shard.Generation, shard.Index, shard.Count = generation, int(index), int(n)
	status, _ := obj["status"].(map[string]interface{})
	if status == nil || status["nodes"] == nil {
		return shard // created, not written yet: version 0, behind any version a report names
	}
	nodes, err := decodeShardStatus(status)
	if err != nil {
		shard.Problem = "NodeInterferenceReportShard " + name + ": " + err.Error()
		return shard
	}
	shard.Version, _ = whole(status["version"])
	shard.Nodes = nodes
	return shard
}

func decodeShardStatus(status map[string]interface{}) (map[string]*policy.Node, error) {
	p := path{"status"}
	if _, err := count(status, "version", p, true); err != nil {
		return nil, err
	}
	raw, ok := status["nodes"].(map[string]interface{})
	if !ok {
		return nil, fail(at(p, ".nodes"), "expected an object")
	}
	if len(raw) > maxEntries {
		return nil, fail(at(p, ".nodes"), "holds %d entries; at most %d", len(raw), maxEntries)
	}
	out := make(map[string]*policy.Node, len(raw))
	for key, item := range raw {
		where := at(p, ".nodes["+key+"]")
		obj, isObj := item.(map[string]interface{})
		if !isObj {
			return nil, fail(where, "expected an object")
		}
		_, node, err := decodeEntry(obj, where)
		if err != nil {
			return nil, err
		}
		out[key] = node
	}
	return out, nil
}

// decodeEntry reads one entry and checks it as the CRD schema does (and the Python reader).
func decodeEntry(obj map[string]interface{}, p path) (string, *policy.Node, error) {
	name, _ := obj["name"].(string)
	if name == "" || len(name) > maxName {
		return "", nil, fail(at(p, ".name"), "expected a name of 1-%d characters", maxName)
	}
	levelText, _ := obj["level"].(string)
	level, ok := policy.ParseLevel(levelText)
	if !ok {
		return "", nil, fail(at(p, ".level"), "expected None, Low, Medium, High or Unknown")
	}
	score, err := percent(obj["score"], at(p, ".score"))
	if err != nil {
		return "", nil, err
	}
	node := &policy.Node{Level: level, Score: score}
	if v, present := obj["dominant"]; present {
		if text, isText := v.(string); !isText || len(text) > maxDominant {
			return "", nil, fail(at(p, ".dominant"), "expected a string of at most %d characters", maxDominant)
		}
	}
	if v, present := obj["dimensions"]; present {
		dims, isObj := v.(map[string]interface{})
		if !isObj || len(dims) > maxDimensions {
			return "", nil, fail(at(p, ".dimensions"), "expected an object of at most %d dimensions", maxDimensions)
		}
		node.Dimensions = make([]policy.Dimension, 0, len(dims))
		for dim, raw := range dims {
			where := at(p, ".dimensions."+dim)
			d, isObj := raw.(map[string]interface{})
			if !isObj {
				return "", nil, fail(where, "expected an object")
			}
			if lv, _ := policy.ParseLevel(asText(d["level"])); lv == policy.LevelUnknown {
				return "", nil, fail(at(where, ".level"), "expected None, Low, Medium or High")
			}
			dimScore, err := percent(d["score"], at(where, ".score"))
			if err != nil {
				return "", nil, err
			}
			node.Dimensions = append(node.Dimensions, policy.Dimension{Name: dim, Score: dimScore})
		}
	}
	if v, present := obj["signals"]; present {
		signals, isObj := v.(map[string]interface{})
		if !isObj {
			return "", nil, fail(at(p, ".signals"), "expected an object")
		}
		for key, raw := range signals {
			value, isNumber := number(raw)
			if !isNumber {
				return "", nil, fail(at(p, ".signals."+key), "expected a number")
			}
			if i, known := policy.SignalIndex(key); known {
				node.SetSignal(i, value)
			}
		}
	}
	if v, present := obj["lastSampleTime"]; present {
		text, isText := v.(string)
		if !isText {
			return "", nil, fail(at(p, ".lastSampleTime"), "expected an RFC 3339 time")
		}
		sampled, err := ParseTime(text)
		if err != nil {
			return "", nil, fail(at(p, ".lastSampleTime"), "%v", err)
		}
		node.Sampled = sampled
	}
	if v, present := obj["reasons"]; present {
		reasons, isList := v.([]interface{})
		if !isList || len(reasons) > maxReasons {
			return "", nil, fail(at(p, ".reasons"), "expected a list of at most %d reasons", maxReasons)
		}
		for i, r := range reasons {
			if text, isText := r.(string); !isText || len([]rune(text)) > maxReasonLen {
				return "", nil, fail(at(p, ".reasons["+strconv.Itoa(i)+"]"), "expected a string of at most %d characters", maxReasonLen)
			}
		}
	}
	return name, node, nil
}

func asText(v interface{}) string {
	text, _ := v.(string)
	return text
}

func percent(v interface{}, p path) (float64, error) {
	value, ok := number(v)
	if !ok || !(value >= 0 && value <= 100) {
		return 0, fail(p, "expected a number within 0-100")
	}
	return value, nil
}

func count(obj map[string]interface{}, key string, p path, required bool) (int64, error) {
	v, present := obj[key]
	if !present && !required {
		return 0, nil
	}
	value, ok := whole(v)
	if !ok || value < 0 {
		return 0, fail(at(p, "."+key), "expected an integer >= 0")
	}
	return value, nil
}

// number is a JSON number as unstructured data holds it (int64 or float64); never NaN or infinite.
func number(v interface{}) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	}
	return 0, false
}

func whole(v interface{}) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

// ParseTime reads an RFC 3339 time into seconds since the epoch as Python's
// datetime.timestamp() does: whole microseconds, divided once.
func ParseTime(text string) (float64, error) {
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, errors.New("invalid RFC 3339 time " + strconv.Quote(text))
	}
	return float64(t.UnixMicro()) / 1e6, nil
}
