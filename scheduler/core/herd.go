// SPDX-License-Identifier: MulanPSL-2.0

package core

import (
	"strconv"
	"sync"
	"time"

	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
)

// Seconds is t as the policy counts time: seconds since the epoch.
func Seconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// Guarded is node's score for a pod with sensitivity under the herd guard, with the placements
// that lowered it, at now (seconds).
func (s *Shared) Guarded(view *View, node string, sensitivity *policy.Sensitivity, now float64) (policy.Guarded, policy.Recent) {
	var recent policy.Recent
	if view.Settings.Herd.Enabled && view.State.Report != nil {
		if entry := view.State.Report.Nodes.Get(node); entry != nil {
			// The sample was taken before the analyzer wrote the report holding it: a node whose
			// clock is ahead of the analyzer's (it accepts samples up to max_clock_skew ahead)
			// is judged by the report's lastUpdateTime.
			sampled := entry.Sampled
			if sampled == 0 || sampled > view.State.Report.Updated {
				sampled = view.State.Report.Updated
			}
			recent = s.Herd.Recent(node, sampled, now, &view.Settings.Herd)
		}
	}
	return policy.GuardedScore(&view.State, node, view.Settings, sensitivity, &recent), recent
}

// SteeredScore is Guarded for a scoring verb: a discount is counted under verb and the score noted in
// steering (which tells the pod, once placed, when the guard moved it off its best node).
func (s *Shared) SteeredScore(view *View, node string, sensitivity *policy.Sensitivity, now float64, verb metrics.Verb, steering *Steering) policy.Guarded {
	g, recent := s.Guarded(view, node, sensitivity, now)
	if g.Discounted() {
		s.Metrics.Discounted(verb, 1)
	}
	steering.Note(node, g, recent)
	return g
}

// Place records a pod placed on node now under the herd guard's settings (nothing when it is off).
func (s *Shared) Place(h *policy.HerdGuard, node, uid string, load policy.Load, now float64) {
	if h.Enabled && node != "" {
		s.Herd.Place(node, uid, now, load, h.MaxAgeSeconds)
	}
}

// Steering follows one pod's node scores to tell, once it is placed, whether the herd guard moved
// it from the node it would have scored best. Safe for concurrent use (nodes are scored in
// parallel).
type Steering struct {
	mu     sync.Mutex
	set    bool
	best   Steer
	chosen string
}

// Steer is the node a pod would have preferred without the herd guard, and why it did not.
type Steer struct {
	Node    string
	Guarded policy.Guarded
	Recent  policy.Recent
	// Chosen is the node the pod was placed on.
	Chosen string
}

// Note records node's scores for the pod: the best node before the guard is kept (of equals, one
// the guard lowered).
func (t *Steering) Note(node string, g policy.Guarded, recent policy.Recent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := &t.best.Guarded
	if !t.set || g.Raw > b.Raw || g.Raw == b.Raw && g.Discounted() && !b.Discounted() {
		t.best = Steer{Node: node, Guarded: g, Recent: recent}
		t.set = true
	}
}

// Steered is the pod's best node before the guard when the guard placed the pod on chosen
// instead: chosen scored lower than it without the guard and at least as high with it. Asked
// again for the same chosen node it answers false (one Event per placement).
func (t *Steering) Steered(chosen string, c policy.Guarded) (Steer, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.best
	if !t.set || chosen == b.Node || t.chosen == chosen || !b.Guarded.Discounted() ||
		c.Raw >= b.Guarded.Raw || c.Score < b.Guarded.Score {
		return Steer{}, false
	}
	t.chosen = chosen
	b.Chosen = chosen
	return b, true
}

// Message says why the pod is not on the node it would have scored best (an Event's text).
func (s Steer) Message(now float64) string {
	g := s.Guarded
	since := now - s.Recent.Oldest
	if since < 0 {
		since = 0
	}
	return "mco-plugin herd guard: node " + s.Node + " (level " + g.Level.String() + ", score " + num(g.Raw) +
		") scored " + num(g.Score) + " after " + strconv.Itoa(s.Recent.Pods) + " pod(s) placed on it in the last " +
		num(since) + "s, not yet in its report sample, raised its " + s.Guarded.Dimension +
		" estimate; placed on " + s.Chosen
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
