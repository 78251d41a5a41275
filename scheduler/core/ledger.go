// SPDX-License-Identifier: MulanPSL-2.0

package core

import (
	"sync"

	"mco.many-core.io/scheduler/policy"
)

// MaxPlacementsPerNode bounds one node's ledger: past it the oldest placement is forgotten.
const MaxPlacementsPerNode = 256

// sweepEvery is the least time (seconds) between two sweeps of expired placements.
const sweepEvery = 1.0

// Ledger remembers the pods placed on each node recently (the herd guard's count). Safe for
// concurrent use. Its memory is bounded: a placement is forgotten MaxAgeSeconds after it was made
// (nodes that disappear go with their last placement), and a node keeps at most
// MaxPlacementsPerNode.
type Ledger struct {
	mu        sync.RWMutex
	nodes     map[string][]placed
	where     map[string]string // pod UID -> node
	lastSweep float64
}

type placed struct {
	uid  string
	at   float64
	load policy.Load
}

// NewLedger makes an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{nodes: map[string][]placed{}, where: map[string]string{}}
}

// Place records pod uid placed on node at at (seconds) with load; a pod placed again moves. It
// also forgets placements older than maxAge seconds.
func (l *Ledger) Place(node, uid string, at float64, load policy.Load, maxAge float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.place(node, uid, at, load, maxAge)
}

func (l *Ledger) place(node, uid string, at float64, load policy.Load, maxAge float64) {
	if at-l.lastSweep >= sweepEvery {
		l.sweep(at - maxAge)
		l.lastSweep = at
	}
	if old, ok := l.where[uid]; ok {
		if old == node {
			return
		}
		l.remove(uid, old)
	}
	list := append(l.nodes[node], placed{uid: uid, at: at, load: load})
	if len(list) > MaxPlacementsPerNode {
		delete(l.where, list[0].uid)
		list = append(list[:0:0], list[1:]...)
	}
	l.nodes[node] = list
	l.where[uid] = node
}

// Placement is one pod placed on a node at At (seconds) with Load.
type Placement struct {
	Node, UID string
	At        float64
	Load      policy.Load
}

// PlaceUnknown records the placements whose pod the ledger does not hold, under one lock (a
// session's scan of the tasks in flight), as Place does each.
func (l *Ledger) PlaceUnknown(placements []Placement, maxAge float64) {
	if len(placements) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range placements {
		p := &placements[i]
		if _, ok := l.where[p.UID]; !ok {
			l.place(p.Node, p.UID, p.At, p.Load, maxAge)
		}
	}
}

// Remove forgets pod uid (its placement was undone).
func (l *Ledger) Remove(uid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if node, ok := l.where[uid]; ok {
		l.remove(uid, node)
	}
}

// Known is true when pod uid has a placement in the ledger.
func (l *Ledger) Known(uid string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.where[uid]
	return ok
}

func (l *Ledger) remove(uid, node string) {
	delete(l.where, uid)
	list := l.nodes[node]
	for i := range list {
		if list[i].uid == uid {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(l.nodes, node)
	} else {
		l.nodes[node] = list
	}
}

// sweep forgets the placements made before cutoff.
func (l *Ledger) sweep(cutoff float64) {
	for node, list := range l.nodes {
		kept := list[:0:0]
		for _, p := range list {
			if p.at >= cutoff {
				kept = append(kept, p)
			} else {
				delete(l.where, p.uid)
			}
		}
		if len(kept) == 0 {
			delete(l.nodes, node)
		} else if len(kept) < len(list) {
			l.nodes[node] = kept
		}
	}
}

// Recent sums the placements on node that still count against a sample taken at sampled, at now.
func (l *Ledger) Recent(node string, sampled, now float64, h *policy.HerdGuard) policy.Recent {
	var r policy.Recent
	if !h.Enabled {
		return r
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, p := range l.nodes[node] {
		if h.Counts(p.at, sampled, now) {
			r.Add(p.load, p.at)
		}
	}
	return r
}

// Len is the number of placements held.
func (l *Ledger) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.where)
}

// Nodes is the number of nodes with a placement held.
func (l *Ledger) Nodes() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.nodes)
}
