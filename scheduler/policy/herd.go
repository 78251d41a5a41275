// SPDX-License-Identifier: MulanPSL-2.0

package policy

import "math"

// HerdGuard settles how the pods placed on a node since its report sample count against it (the
// herdGuard argument). The report describes each node as it was when it was last sampled; a burst
// of pods placed before the next sample all see the same quietest nodes. The guard adds an
// estimate of what each such pod brings to the dimensions it loads until a sample taken
// SettleSeconds after the placement is in the report.
type HerdGuard struct {
	// Enabled off: no placement is counted and every score is RawScore's.
	Enabled bool
	// PerPodScore is the interference (0-100 points) one placed pod adds to each dimension it loads.
	PerPodScore float64
	// SettleSeconds: a placement counts until the node's sample is at least this much newer (a pod
	// starts, and PSI avg10 needs about ten seconds to show it).
	SettleSeconds float64
	// MaxAgeSeconds: a placement never counts longer than this (a node whose samples stop).
	MaxAgeSeconds float64
}

// DefaultHerdGuard is the herdGuard argument's default.
func DefaultHerdGuard() HerdGuard {
	return HerdGuard{Enabled: true, PerPodScore: 5, SettleSeconds: 10, MaxAgeSeconds: 60}
}

// Counts is true when a pod placed at placed (seconds) still counts against a node sampled at
// sampled, at now. A sample dated after now (a clock ahead of the scheduler's) is taken as of now:
// whatever the other clocks say, a placement counts at least SettleSeconds by the scheduler's.
func (h *HerdGuard) Counts(placed, sampled, now float64) bool {
	if sampled > now {
		sampled = now
	}
	return h.Enabled && sampled < placed+h.SettleSeconds && now-placed <= h.MaxAgeSeconds
}

// Load is what one placed pod loads: the dimensions it names with their weights, or, when it
// names none, every dimension (All).
type Load struct {
	Weights []Weight
	All     bool
}

// PodLoad is a pod's load: the dimensions of its sensitive-to hint (a pod whose work depends on a
// resource uses it), else the resources it requests (cpu, memory), else every dimension.
func PodLoad(sensitivity *Sensitivity, requestsCPU, requestsMemory bool) Load {
	if sensitivity != nil && len(sensitivity.Weights) > 0 {
		return Load{Weights: sensitivity.Weights}
	}
	var weights []Weight
	if requestsCPU {
		weights = append(weights, Weight{Name: "cpu", Weight: 1})
	}
	if requestsMemory {
		weights = append(weights, Weight{Name: "memory", Weight: 1})
	}
	if weights == nil {
		return Load{All: true}
	}
	return Load{Weights: weights}
}

// Recent is what the pods still counted on one node load, summed.
type Recent struct {
	// Pods is the number of pods counted.
	Pods int
	// Weights is the summed weight per named dimension.
	Weights []Weight
	// All is the number of pods that load every dimension.
	All float64
	// Oldest is the placement time (seconds) of the oldest pod counted.
	Oldest float64
}

// Add counts one more pod placed at placed.
func (r *Recent) Add(load Load, placed float64) {
	if r.Pods == 0 || placed < r.Oldest {
		r.Oldest = placed
	}
	r.Pods++
	if load.All {
		r.All++
	}
	for _, w := range load.Weights {
		found := false
		for i := range r.Weights {
			if r.Weights[i].Name == w.Name {
				r.Weights[i].Weight += w.Weight
				found = true
				break
			}
		}
		if !found {
			r.Weights = append(r.Weights, w)
		}
	}
}

// added is the interference the counted pods add to dimension name ("" names none: only the
// pods that load every dimension count).
func (r *Recent) added(name string, perPod float64) float64 {
	sum := r.All
	for _, w := range r.Weights {
		if w.Name == name {
			sum += w.Weight
		}
	}
	return perPod * sum
}

// NodeDimension is the name the guard uses for a report entry without dimensions.
const NodeDimension = "node"

// Guarded is a node's score for a pod with and without the guard.
type Guarded struct {
	// Raw is RawScore; Score is Raw lowered by the recent placements (equal when none count).
	Raw, Score float64
	// Dimension is the dimension whose estimate set Score ("" when the guard changed nothing).
	Dimension string
	// Level is the node's level in the report.
	Level Level
}

// Discounted is true when the guard lowered the score.
func (g Guarded) Discounted() bool { return g.Dimension != "" }

// GuardedScore is RawScore for a pod with sensitivity once the pods in recent are added to the
// entry's dimensions: the worst (weighted) dimension, each raised by what recent adds to it, never
// above 100. A node score above its worst dimension (combine: compound) is raised as the compound
// of that dimension with the rest: 100*(1-(1-node)(1-raised)/(1-dimension)) on the 0-1 scale.
// Nodes without a report entry or with level Unknown keep their neutral score.
func GuardedScore(state *State, node string, s *Settings, sensitivity *Sensitivity, recent *Recent) Guarded {
	raw := RawScore(state, node, s, sensitivity)
	g := Guarded{Raw: raw, Score: raw, Level: LevelUnknown}
	if state.Report == nil {
		return g
	}
	entry := state.Report.Nodes.Get(node)
	if entry == nil {
		return g
	}
	g.Level = entry.Level
	if !s.Herd.Enabled || recent == nil || recent.Pods == 0 || entry.Level == LevelUnknown ||
		math.IsNaN(entry.Score) || math.IsInf(entry.Score, 0) {
		return g
	}
	worst := 100 - raw
	// With the analyzer's combine: compound, several elevated dimensions add up to a node score
	// above its worst dimension; a pod's node score is then raised as a factor of that compound.
	compound := sensitivity == nil && entry.Score > worstDimension(entry)
	consider := func(name string, weight float64) {
		add := recent.added(name, s.Herd.PerPodScore)
		if add <= 0 {
			return
		}
		base := dimensionScore(entry, name)
		estimate := math.Min(100, base+add)
		if compound && base < 100 {
			estimate = math.Max(estimate, 100*(1-(1-entry.Score/100)*(1-estimate/100)/(1-base/100)))
		}
		if v := weight * estimate; v > worst {
			worst, g.Dimension = v, name
			if name == "" {
				g.Dimension = NodeDimension
			}
		}
	}
	switch {
	case sensitivity != nil:
		for _, w := range sensitivity.Weights {
			consider(w.Name, w.Weight)
		}
	case len(entry.Dimensions) == 0 && len(recent.Weights) == 0:
		consider("", 1)
	default:
		for _, d := range entry.Dimensions {
			consider(d.Name, 1)
		}
		for _, w := range recent.Weights {
			consider(w.Name, 1)
		}
	}
	g.Score = math.Min(100, math.Max(0, 100-worst))
	return g
}

// worstDimension is the entry's highest dimension score (its node score without dimensions).
func worstDimension(entry *Node) float64 {
	if len(entry.Dimensions) == 0 {
		return entry.Score
	}
	worst := 0.0
	for _, d := range entry.Dimensions {
		worst = math.Max(worst, d.Score)
	}
	return worst
}

// dimensionScore is the entry's score in dimension name: listed dimensions score above 0, the
// rest 0; an entry without dimensions (or name "") has its node score in each.
func dimensionScore(entry *Node, name string) float64 {
	if len(entry.Dimensions) == 0 || name == "" {
		return entry.Score
	}
	for _, d := range entry.Dimensions {
		if d.Name == name {
			return d.Score
		}
	}
	return 0
}

// VolcanoScale is a 0-100 score as VolcanoScore returns it.
func VolcanoScale(raw float64, s *Settings) float64 {
	value := raw * s.ScoreWeight
	if value > 0 && !math.IsInf(value, 0) { // NaN fails the comparison
		return value
	}
	return 0
}

// FrameworkScale is a 0-100 score as FrameworkScore returns it.
func FrameworkScale(raw float64) int64 { return int64(math.RoundToEven(raw)) }
