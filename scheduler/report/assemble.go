// SPDX-License-Identifier: MulanPSL-2.0

package report

import (
	"hash/crc32"
	"sort"
	"strconv"
	"strings"

	"mco.many-core.io/scheduler/policy"
)

// ShardIndexOf is the shard of node name among count (a power of two): crc32(name) mod count,
// as the analyzer places it.
func ShardIndexOf(name string, count int) int {
	return int(crc32.ChecksumIEEE([]byte(name)) & uint32(count-1))
}

// Sharded is the nodes of a sharded report as one read-only set: every shard's entries in one map
// (made again only when a shard changes: a scheduler looks a node up hundreds of times a pod),
// under the changes laid over them (the report object's, which change every report).
type Sharded struct {
	shards  []*Shard
	all     map[string]*policy.Node
	changed map[string]*policy.Node
	size    int
}

// Get implements policy.Nodes.
func (s *Sharded) Get(name string) *policy.Node {
	if len(s.changed) > 0 {
		if node, ok := s.changed[name]; ok {
			return node // nil: the node is gone
		}
	}
	return s.all[name]
}

// Len implements policy.Nodes.
func (s *Sharded) Len() int { return s.size }

// Gather puts index's generation together from shards (by object name): every node of it with its
// changes laid over, or why that cannot be done yet (a shard missing, behind or unreadable).
// previous, when given, is the last state gathered: its merged entries are reused when the
// generation's shard objects are the very same (only the report object changed).
func Gather(index *Index, shards map[string]*Shard, previous *Sharded) (*Sharded, string) {
	if index.ChangeProblem != "" {
		return nil, index.ChangeProblem
	}
	mine := make([]*Shard, index.Count)
	var bad []string
	for _, s := range shards {
		if s.Generation != index.Generation || s.Count != index.Count || s.Index < 0 || s.Index >= index.Count {
			continue
		}
		if s.Problem != "" {
			bad = append(bad, s.Problem)
		}
		mine[s.Index] = s
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, bad[0]
	}
	var behind []string
	for k, s := range mine {
		if s == nil || s.Version < index.Versions[k] {
			behind = append(behind, strconv.Itoa(k))
		}
	}
	if len(behind) > 0 {
		shown := strings.Join(behind[:min(8, len(behind))], ", ")
		if len(behind) > 8 {
			shown += ", ..."
		}
		return nil, "report generation " + strconv.FormatInt(index.Generation, 10) + " is incomplete: " +
			strconv.Itoa(len(behind)) + " of " + strconv.Itoa(index.Count) +
			" shards missing or older than the report names (" + shown + "); the analyzer may be writing them"
	}
	out := &Sharded{shards: mine, changed: make(map[string]*policy.Node, len(index.Changes))}
	if previous != nil && sameShards(previous.shards, mine) {
		out.all = previous.all
	} else {
		total := 0
		for _, s := range mine {
			total += len(s.Nodes)
		}
		out.all = make(map[string]*policy.Node, total)
		for _, s := range mine {
			for name, node := range s.Nodes {
				out.all[name] = node
			}
		}
	}
	out.size = len(out.all)
	for name, change := range index.Changes {
		held := out.all[name]
		switch {
		case change == nil:
			out.changed[name] = nil
		case held == nil:
			out.changed[name] = change
		default:
			// The shard's entry with the change's level and score. Its dimensions go: they are as
			// old as the shard, and without them a pod's sensitivity is judged by the node score.
			laid := *held
			laid.Level, laid.Score, laid.Dimensions = change.Level, change.Score, nil
			out.changed[name] = &laid
		}
		if held != nil {
			out.size--
		}
		if change != nil {
			out.size++
		}
	}
	return out, ""
}

func sameShards(a, b []*Shard) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
