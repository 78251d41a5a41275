// SPDX-License-Identifier: MulanPSL-2.0

package core_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"mco.many-core.io/scheduler/core"
	"mco.many-core.io/scheduler/policy"
)

var (
	cpuLoad = policy.Load{Weights: []policy.Weight{{Name: "cpu", Weight: 1}}}
	ioLoad  = policy.Load{Weights: []policy.Weight{{Name: "io", Weight: 1}}}
)

func TestLedgerCountsUntilTheSampleCatchesUp(t *testing.T) {
	h := policy.DefaultHerdGuard() // settle 10 s, max age 60 s
	l := core.NewLedger()
	l.Place("a", "p1", 100, cpuLoad, h.MaxAgeSeconds)
	l.Place("a", "p2", 102, ioLoad, h.MaxAgeSeconds)
	l.Place("b", "p3", 102, cpuLoad, h.MaxAgeSeconds)
	r := l.Recent("a", 95, 103, &h)
	if r.Pods != 2 || r.Oldest != 100 || len(r.Weights) != 2 {
		t.Fatalf("before any new sample: %+v", r)
	}
	if r := l.Recent("a", 111, 112, &h); r.Pods != 1 || r.Weights[0].Name != "io" {
		t.Errorf("a sample settleSeconds after p1 has it, not p2: %+v", r)
	}
	if r := l.Recent("a", 120, 121, &h); r.Pods != 0 {
		t.Errorf("a later sample has both: %+v", r)
	}
	if r := l.Recent("c", 0, 103, &h); r.Pods != 0 {
		t.Errorf("a node without placements: %+v", r)
	}
	off := h
	off.Enabled = false
	if r := l.Recent("a", 95, 103, &off); r.Pods != 0 {
		t.Errorf("guard off: %+v", r)
	}
}

func TestLedgerRemoveAndMove(t *testing.T) {
	h := policy.DefaultHerdGuard()
	l := core.NewLedger()
	l.Place("a", "p1", 100, cpuLoad, h.MaxAgeSeconds)
	l.Place("a", "p1", 101, cpuLoad, h.MaxAgeSeconds) // told twice: counted once
	if r := l.Recent("a", 0, 101, &h); r.Pods != 1 {
		t.Errorf("placed twice on one node: %+v", r)
	}
	l.Place("b", "p1", 102, cpuLoad, h.MaxAgeSeconds)
	if ra, rb := l.Recent("a", 0, 102, &h), l.Recent("b", 0, 102, &h); ra.Pods != 0 || rb.Pods != 1 {
		t.Errorf("a pod placed again moves: a %+v b %+v", ra, rb)
	}
	l.Remove("p1")
	l.Remove("never-placed")
	if l.Len() != 0 || l.Nodes() != 0 || l.Known("p1") {
		t.Errorf("after the deallocation: %d placements on %d nodes", l.Len(), l.Nodes())
	}
}

func TestLedgerForgetsOldPlacementsAndNodes(t *testing.T) {
	h := policy.DefaultHerdGuard()
	l := core.NewLedger()
	for i := 0; i < 50; i++ {
		l.Place("node-"+strconv.Itoa(i), "p"+strconv.Itoa(i), 100, cpuLoad, h.MaxAgeSeconds)
	}
	if l.Nodes() != 50 {
		t.Fatalf("nodes %d", l.Nodes())
	}
	l.Place("new", "late", 100+h.MaxAgeSeconds+1, cpuLoad, h.MaxAgeSeconds)
	if l.Nodes() != 1 || l.Len() != 1 {
		t.Errorf("placements older than maxAgeSeconds (and their nodes) stay: %d placements on %d nodes", l.Len(), l.Nodes())
	}
	for i := 0; i < core.MaxPlacementsPerNode+10; i++ {
		l.Place("hot", "h"+strconv.Itoa(i), 200, cpuLoad, h.MaxAgeSeconds)
	}
	if r := l.Recent("hot", 0, 200, &h); r.Pods != core.MaxPlacementsPerNode || l.Known("h0") || !l.Known("h10") {
		t.Errorf("one node holds %d placements (bound %d)", r.Pods, core.MaxPlacementsPerNode)
	}
}

func TestLedgerPlaceUnknown(t *testing.T) {
	h := policy.DefaultHerdGuard()
	l := core.NewLedger()
	l.PlaceUnknown(nil, h.MaxAgeSeconds)
	l.Place("a", "held", 100, cpuLoad, h.MaxAgeSeconds)
	l.PlaceUnknown([]core.Placement{
		{Node: "b", UID: "held", At: 104, Load: ioLoad}, // held: kept on a at 100
		{Node: "a", UID: "new", At: 103, Load: ioLoad},
		{Node: "b", UID: "other", At: 104, Load: cpuLoad},
	}, h.MaxAgeSeconds)
	if l.Len() != 3 || l.Nodes() != 2 {
		t.Fatalf("held %d on %d nodes, want 3 on 2", l.Len(), l.Nodes())
	}
	if r := l.Recent("a", 95, 105, &h); r.Pods != 2 || r.Oldest != 100 {
		t.Errorf("a: %+v", r)
	}
	if r := l.Recent("b", 95, 105, &h); r.Pods != 1 || r.Weights[0].Name != "cpu" {
		t.Errorf("b: %+v", r)
	}
	l.PlaceUnknown([]core.Placement{{Node: "c", UID: "late", At: 200, Load: cpuLoad}}, h.MaxAgeSeconds)
	if l.Len() != 1 || l.Nodes() != 1 {
		t.Errorf("placements older than maxAge are swept: %d held on %d nodes", l.Len(), l.Nodes())
	}
}

func TestLedgerConcurrentUse(t *testing.T) {
	h := policy.DefaultHerdGuard()
	l := core.NewLedger()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				uid := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				node := "n" + strconv.Itoa(i%5)
				l.Place(node, uid, 100+float64(i)/100, cpuLoad, h.MaxAgeSeconds)
				_ = l.Recent(node, 0, 103, &h)
				if i%3 == 0 {
					l.Remove(uid)
				}
			}
		}(w)
	}
	wg.Wait()
	total := 0
	for i := 0; i < 5; i++ {
		total += l.Recent("n"+strconv.Itoa(i), 0, 103, &h).Pods
	}
	if want := 8 * (200 - 67); total != want || l.Len() != want {
		t.Errorf("after concurrent places and removes: %d counted, %d held, want %d", total, l.Len(), want)
	}
}

func TestSteering(t *testing.T) {
	best := policy.Guarded{Raw: 100, Score: 80, Dimension: "cpu", Level: policy.LevelNone}
	other := policy.Guarded{Raw: 90, Score: 90, Level: policy.LevelLow}
	r := policy.Recent{}
	r.Add(cpuLoad, 95)
	r.Add(cpuLoad, 97)
	var s core.Steering
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i == 7 {
				s.Note("quiet", best, r)
			} else {
				s.Note("low-"+strconv.Itoa(i), other, policy.Recent{})
			}
		}(i)
	}
	wg.Wait()
	if _, steered := s.Steered("quiet", best); steered {
		t.Error("placed on its best node: not steered")
	}
	got, steered := s.Steered("low-3", other)
	if !steered || got.Node != "quiet" || got.Chosen != "low-3" {
		t.Fatalf("steered %v: %+v", steered, got)
	}
	msg := got.Message(100)
	for _, want := range []string{"node quiet", "level None", "2 pod(s)", "last 5s", "cpu", "placed on low-3"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if _, again := s.Steered("low-3", other); again {
		t.Error("one placement, one Event")
	}
	var notGuard core.Steering
	notGuard.Note("quiet", best, r)
	if _, steered := notGuard.Steered("worse", policy.Guarded{Raw: 70, Score: 70}); steered {
		t.Error("a node that scores lower with the guard too was chosen by other plugins, not by the guard")
	}
	var undiscounted core.Steering
	undiscounted.Note("quiet", policy.Guarded{Raw: 100, Score: 100}, policy.Recent{})
	if _, steered := undiscounted.Steered("low", other); steered {
		t.Error("the guard lowered nothing: not steered")
	}
}
