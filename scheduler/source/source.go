// SPDX-License-Identifier: MulanPSL-2.0

// Package source keeps the NodeInterferenceReport and its shards from two dynamic informers and
// serves the newest usable report as a snapshot swapped atomically (package report reads the
// documents; this package is the Kubernetes side).
package source

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"mco.many-core.io/scheduler/policy"
	"mco.many-core.io/scheduler/report"
)

// The resources read.
var (
	ReportResource = schema.GroupVersionResource{Group: report.Group, Version: report.Version, Resource: report.Plural}
	ShardResource  = schema.GroupVersionResource{Group: report.Group, Version: report.Version, Resource: report.ShardPlural}
)

// Snapshot is the newest report a source holds, or why there is none. Never changed once made.
type Snapshot struct {
	// Report is nil when there is no usable report.
	Report *policy.Report
	// Problem says why there is no usable report.
	Problem string
	// Unreadable: the latest document exists but could not be read.
	Unreadable bool
	// Synced: both informers finished their first list.
	Synced bool
	// Version is the resourceVersion of the report object it was made from ("": none).
	Version string
}

// Source keeps the report named Name from two informers (the report object and its shards) and
// serves it as a Snapshot; it never blocks a reader and never panics on what it reads.
type Source struct {
	Name    string
	reports cache.SharedIndexInformer
	shards  cache.SharedIndexInformer
	snap    atomic.Pointer[Snapshot]

	mu        sync.Mutex
	lastError atomic.Pointer[string]
	served    *policy.Report // the last whole sharded state, dated by the report object it came with
	onProblem func(kind, text string)
}

// headObject and shardObject are what the informers store: the decoded document, the raw object
// let go as soon as it arrives. The object meta holds the name only (the store's key).
type headObject struct {
	metav1.ObjectMeta
	head    *report.Head
	problem string
	empty   bool
}

type shardObject struct {
	metav1.ObjectMeta
	shard *report.Shard
}

// NewSource makes the informers for report name; Run starts them. onProblem, when set, hears of
// every list/watch error and unusable document (kind: "watch", "unreadable", "shards").
func NewSource(client dynamic.Interface, name string, onProblem func(kind, text string)) *Source {
	s := &Source{Name: name, onProblem: onProblem}
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	byReport := func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{report.ReportLabel: name}).String()
	}
	s.reports = dynamicinformer.NewFilteredDynamicInformer(client, ReportResource, "", 0, cache.Indexers{}, byName).Informer()
	s.shards = dynamicinformer.NewFilteredDynamicInformer(client, ShardResource, "", 0, cache.Indexers{}, byReport).Informer()
	_ = s.reports.SetTransform(transformHead)
	_ = s.shards.SetTransform(transformShard)
	for _, inf := range []cache.SharedIndexInformer{s.reports, s.shards} {
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			text := err.Error()
			s.lastError.Store(&text)
			s.problem("watch", text)
		})
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(interface{}) { s.rebuild() },
			UpdateFunc: func(interface{}, interface{}) { s.rebuild() },
			DeleteFunc: func(interface{}) { s.rebuild() },
		})
	}
	s.snap.Store(&Snapshot{Problem: "NodeInterferenceReport " + name + " not listed yet"})
	return s
}

// Run runs the informers until stop is closed; it does not wait for them to sync.
func (s *Source) Run(stop <-chan struct{}) {
	go s.reports.Run(stop)
	go s.shards.Run(stop)
	go func() { // the first snapshot after both lists, even when they are empty
		if cache.WaitForCacheSync(stop, s.reports.HasSynced, s.shards.HasSynced) {
			s.rebuild()
		}
	}()
}

// Snapshot is the report now: one atomic load.
func (s *Source) Snapshot() *Snapshot {
	snap := s.snap.Load()
	if !snap.Synced {
		if text := s.lastError.Load(); text != nil && *text != "" {
			return &Snapshot{Problem: "NodeInterferenceReport " + s.Name + " not listed yet: " + *text}
		}
	}
	return snap
}

func (s *Source) problem(kind, text string) {
	if s.onProblem != nil {
		s.onProblem(kind, text)
	}
}

func (s *Source) synced() bool { return s.reports.HasSynced() && s.shards.HasSynced() }

// rebuild makes the snapshot from what both stores hold now (informer goroutines call it after
// every event; a shard event costs its shard's changes, not the whole report).
func (s *Source) rebuild() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced() {
		s.lastError.Store(nil)
	}
	var head *headObject
	for _, obj := range s.reports.GetStore().List() {
		if h, ok := obj.(*headObject); ok && h.Name == s.Name {
			head = h
		}
	}
	shards := map[string]*report.Shard{}
	for _, obj := range s.shards.GetStore().List() {
		if sh, ok := obj.(*shardObject); ok {
			shards[sh.Name] = sh.shard
		}
	}
	next := s.decide(head, shards)
	next.Synced = s.synced()
	if head != nil {
		next.Version = head.ResourceVersion
	}
	s.snap.Store(next)
}

// WaitFor waits up to timeout until the snapshot is made from the report object at resourceVersion
// version or a later one ("": until there is no report object); false when it is not by then. For
// a caller that heard of a new object from another informer and must not decide on the one before.
func (s *Source) WaitFor(version string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !atOrAfter(s.snap.Load().Version, version) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// atOrAfter: have is version want or later. resourceVersions are opaque to clients, but an
// etcd-backed API server's are increasing integers; when either is not one, only equality counts.
func atOrAfter(have, want string) bool {
	if have == want {
		return true
	}
	h, errH := strconv.ParseUint(have, 10, 64)
	w, errW := strconv.ParseUint(want, 10, 64)
	return errH == nil && errW == nil && want != "" && h > w
}

func (s *Source) decide(head *headObject, shards map[string]*report.Shard) *Snapshot {
	switch {
	case head == nil:
		s.served = nil
		return &Snapshot{Problem: "NodeInterferenceReport " + s.Name + " does not exist"}
	case head.empty:
		s.served = nil
		return &Snapshot{Problem: "NodeInterferenceReport " + s.Name + " has no status yet"}
	case head.problem != "":
		s.problem("unreadable", head.problem)
		return &Snapshot{Problem: "NodeInterferenceReport " + s.Name + ": " + head.problem, Unreadable: true}
	case head.head.Index == nil:
		s.served = nil
		return &Snapshot{Report: &policy.Report{Updated: head.head.Updated, Nodes: head.head.Nodes}}
	}
	var previous *report.Sharded
	if s.served != nil {
		previous, _ = s.served.Nodes.(*report.Sharded)
	}
	nodes, problem := report.Gather(head.head.Index, shards, previous)
	if problem != "" {
		s.problem("shards", problem)
		previous := s.snap.Load()
		if s.served != nil {
			return &Snapshot{Report: s.served} // the last whole state, until it ages out
		}
		if previous.Report != nil {
			return &Snapshot{Report: previous.Report} // just turned sharded: the inline one until whole
		}
		return &Snapshot{Problem: problem}
	}
	s.served = &policy.Report{Updated: head.head.Updated, Nodes: nodes}
	return &Snapshot{Report: s.served}
}

func transformHead(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // already transformed (a re-list hands the stored object back)
	}
	out := &headObject{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}}
	status, _ := u.Object["status"].(map[string]interface{})
	if len(status) == 0 {
		out.empty = true
		return out, nil
	}
	head, err := report.DecodeStatus(status)
	if err != nil {
		out.problem = err.Error()
		return out, nil
	}
	out.head = head
	return out, nil
}

func transformShard(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return &shardObject{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion()},
		shard:      report.DecodeShard(u.Object),
	}, nil
}

// WaitSynced waits up to timeout for the first lists (tests and tools; schedulers never wait).
func (s *Source) WaitSynced(timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), s.reports.HasSynced, s.shards.HasSynced)
}
