// SPDX-License-Identifier: MulanPSL-2.0

package source_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"mco.many-core.io/scheduler/report"
	"mco.many-core.io/scheduler/source"
)

const deadline = 5 * time.Second

// cluster is a fake API server holding the two resources, and a source of report "cluster" on it.
type cluster struct {
	t        *testing.T
	client   *fake.FakeDynamicClient
	src      *source.Source
	watching chan schema.GroupVersionResource

	mu       sync.Mutex
	problems []string // "kind: text", in the order heard
}

func newCluster(t *testing.T, objects ...runtime.Object) *cluster {
	t.Helper()
	client := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		source.ReportResource: "NodeInterferenceReportList",
		source.ShardResource:  "NodeInterferenceReportShardList",
	}, objects...)
	c := &cluster{t: t, client: client, watching: make(chan schema.GroupVersionResource, 16)}
	// The fake delivers only what happens after a watch opens: say when each one is open, so a
	// test changes objects only once the informers are sure to hear of it.
	client.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		select {
		case c.watching <- action.GetResource():
		default:
		}
		return true, w, nil
	})
	c.src = source.NewSource(client, "cluster", func(kind, text string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.problems = append(c.problems, kind+": "+text)
	})
	return c
}

// run starts the source and waits for its first snapshot after both lists and both watches.
func (c *cluster) run() {
	c.t.Helper()
	stop := make(chan struct{})
	c.t.Cleanup(func() { close(stop) })
	c.src.Run(stop)
	for open := map[schema.GroupVersionResource]bool{}; len(open) < 2; {
		select {
		case gvr := <-c.watching:
			open[gvr] = true
		case <-time.After(deadline):
			c.t.Fatalf("watches not opened within %v", deadline)
		}
	}
	c.waitFor("synced", func(s *source.Snapshot) bool { return s.Synced })
}

// waitFor polls the snapshot until ok holds, for up to deadline.
func (c *cluster) waitFor(what string, ok func(*source.Snapshot) bool) *source.Snapshot {
	c.t.Helper()
	end := time.Now().Add(deadline)
	for {
		snap := c.src.Snapshot()
		if ok(snap) {
			return snap
		}
		if time.Now().After(end) {
			c.t.Fatalf("no snapshot %s within %v; last %+v", what, deadline, snap)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heard waits until a problem starting with prefix has been heard at least n times.
func (c *cluster) heard(prefix string, n int) {
	c.t.Helper()
	end := time.Now().Add(deadline)
	for {
		c.mu.Lock()
		count := 0
		for _, p := range c.problems {
			if strings.HasPrefix(p, prefix) {
				count++
			}
		}
		c.mu.Unlock()
		if count >= n {
			return
		}
		if time.Now().After(end) {
			c.t.Fatalf("heard %q %d times, not %d, within %v", prefix, count, n, deadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *cluster) put(resource schema.GroupVersionResource, obj *unstructured.Unstructured) {
	c.t.Helper()
	ctx := context.Background()
	r := c.client.Resource(resource)
	old, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		if _, err := r.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	if _, err := r.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) delete(resource schema.GroupVersionResource, name string) {
	c.t.Helper()
	if err := c.client.Resource(resource).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// object reads a JSON object as the API machinery does (integers int64, other numbers float64).
func object(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(text)); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return u
}

func reportObject(t *testing.T, name, status string) *unstructured.Unstructured {
	t.Helper()
	text := `{"apiVersion": "mco.many-core.io/v1alpha1", "kind": "NodeInterferenceReport", "metadata": {"name": "` + name + `"}`
	if status != "" {
		text += `, "status": ` + status
	}
	return object(t, text+"}")
}

func shardObject(t *testing.T, name, spec, status string) *unstructured.Unstructured {
	t.Helper()
	text := `{"apiVersion": "mco.many-core.io/v1alpha1", "kind": "NodeInterferenceReportShard",
		"metadata": {"name": "` + name + `", "labels": {"` + report.ReportLabel + `": "cluster"}}, "spec": ` + spec
	if status != "" {
		text += `, "status": ` + status
	}
	return object(t, text+"}")
}

func updatedAt(t *testing.T, stamp string) float64 {
	t.Helper()
	v, err := report.ParseTime(stamp)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBeforeTheFirstList(t *testing.T) {
	c := newCluster(t)
	snap := c.src.Snapshot()
	if snap.Report != nil || snap.Synced || snap.Problem != "NodeInterferenceReport cluster not listed yet" {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestListErrorIsTheProblem(t *testing.T) {
	c := newCluster(t)
	c.client.PrependReactor("list", report.Plural, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("nodeinterferencereports is forbidden")
	})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.src.Run(stop)
	c.waitFor("naming the list error", func(s *source.Snapshot) bool {
		return !s.Synced && strings.HasPrefix(s.Problem, "NodeInterferenceReport cluster not listed yet: ") &&
			strings.Contains(s.Problem, "nodeinterferencereports is forbidden")
	})
	c.heard("watch: ", 1)
}

func TestNoReport(t *testing.T) {
	// Another report's object is no concern of this source (the fake ignores field selectors).
	c := newCluster(t, reportObject(t, "other", `{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": []}`))
	c.run()
	if snap := c.src.Snapshot(); snap.Report != nil || snap.Problem != "NodeInterferenceReport cluster does not exist" {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestInlineReportFollowed(t *testing.T) {
	c := newCluster(t, reportObject(t, "cluster", ""))
	c.run()
	if snap := c.src.Snapshot(); snap.Report != nil || snap.Problem != "NodeInterferenceReport cluster has no status yet" {
		t.Errorf("without status: %+v", snap)
	}

	c.put(source.ReportResource, reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": [
		{"name": "n1", "level": "High", "score": 90}, {"name": "n2", "level": "Low", "score": 10.5}]}`))
	snap := c.waitFor("with the inline report", func(s *source.Snapshot) bool { return s.Report != nil })
	if snap.Report.Updated != updatedAt(t, "2025-01-02T03:04:05Z") || snap.Report.Nodes.Len() != 2 || snap.Problem != "" {
		t.Fatalf("snapshot %+v", snap)
	}
	if n := snap.Report.Nodes.Get("n2"); n == nil || n.Score != 10.5 {
		t.Errorf("n2 %+v", n)
	}

	c.put(source.ReportResource, reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:05:05Z", "nodes": [
		{"name": "n3", "level": "None", "score": 0}]}`))
	snap = c.waitFor("with the updated report", func(s *source.Snapshot) bool {
		return s.Report != nil && s.Report.Updated == updatedAt(t, "2025-01-02T03:05:05Z")
	})
	if snap.Report.Nodes.Len() != 1 || snap.Report.Nodes.Get("n3") == nil || snap.Report.Nodes.Get("n1") != nil {
		t.Errorf("updated nodes: %d", snap.Report.Nodes.Len())
	}

	c.put(source.ReportResource, reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:06:05Z",
		"shards": {"generation": 1, "count": 3, "versions": [1, 1, 1]}}`))
	snap = c.waitFor("unreadable", func(s *source.Snapshot) bool { return s.Unreadable })
	if snap.Report != nil || !strings.HasPrefix(snap.Problem, "NodeInterferenceReport cluster: status.shards.count: ") {
		t.Errorf("unreadable: %+v", snap)
	}
	c.heard("unreadable: status.shards.count: ", 1)

	c.delete(source.ReportResource, "cluster")
	c.waitFor("after the delete", func(s *source.Snapshot) bool {
		return s.Problem == "NodeInterferenceReport cluster does not exist" && s.Report == nil && !s.Unreadable
	})
}

func shardSpec(gen, index, count int) string {
	return `{"report": "cluster", "generation": ` + strconv.Itoa(gen) + `, "index": ` + strconv.Itoa(index) + `, "count": ` + strconv.Itoa(count) + `}`
}

func nodesStatus(version int, names ...string) string {
	var items []string
	for _, name := range names {
		items = append(items, `"`+name+`": {"name": "`+name+`", "level": "Low", "score": 20, "signals": {"psiIoSomeAvg10": 4}}`)
	}
	return `{"version": ` + strconv.Itoa(version) + `, "nodes": {` + strings.Join(items, ", ") + `}}`
}

func TestShardedReportServedWhole(t *testing.T) {
	// Where Python's zlib.crc32 puts the names: among 2 shards n0 and n1 in 0, n4 and n5 in 1;
	// among 4, n1 in 0, n5 in 1, n0 in 2.
	c := newCluster(t,
		shardObject(t, "cluster-1-0", shardSpec(1, 0, 2), nodesStatus(1, "n0", "n1")),
		shardObject(t, "cluster-1-1", shardSpec(1, 1, 2), nodesStatus(2, "n4", "n5")),
		reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:04:05Z",
			"shards": {"generation": 1, "count": 2, "versions": [1, 2], "changes": {"n1": "High 95", "n5": null}}}`),
	)
	c.run()
	first := c.waitFor("the whole generation", func(s *source.Snapshot) bool { return s.Report != nil })
	nodes := first.Report.Nodes
	if first.Report.Updated != updatedAt(t, "2025-01-02T03:04:05Z") || nodes.Len() != 3 {
		t.Fatalf("snapshot %+v, %d nodes", first, nodes.Len())
	}
	if n := nodes.Get("n1"); n == nil || n.Level.String() != "High" || n.Score != 95 {
		t.Errorf("n1 %+v, want the change laid over", n)
	}
	if nodes.Get("n5") != nil || nodes.Get("n4") == nil || nodes.Get("n0") == nil {
		t.Error("wrong nodes")
	}

	// Generation 2 in four shards: the analyzer writes one, then switches the report to it.
	c.put(source.ShardResource, shardObject(t, "cluster-2-0", shardSpec(2, 0, 4), nodesStatus(1, "n1")))
	c.put(source.ReportResource, reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:05:05Z",
		"shards": {"generation": 2, "count": 4, "versions": [1, 1, 1, 1]}}`))
	incomplete := "shards: report generation 2 is incomplete: 3 of 4 shards missing or older than the report names (1, 2, 3)"
	c.heard(incomplete, 1)
	// One more event: once it is heard, the snapshot of the previous one is in place.
	c.put(source.ShardResource, shardObject(t, "cluster-2-1", shardSpec(2, 1, 4), ""))
	c.heard("shards: report generation 2 is incomplete: 3 of 4", 2)
	snap := c.src.Snapshot()
	if snap.Report == nil || snap.Report.Updated != first.Report.Updated || snap.Problem != "" {
		t.Fatalf("while generation 2 is incomplete: %+v, want the last whole state %+v", snap, first)
	}
	if n := snap.Report.Nodes.Get("n1"); snap.Report.Nodes.Len() != 3 || n == nil || n.Score != 95 {
		t.Errorf("while generation 2 is incomplete: %d nodes, n1 %+v", snap.Report.Nodes.Len(), n)
	}

	c.put(source.ShardResource, shardObject(t, "cluster-2-1", shardSpec(2, 1, 4), nodesStatus(1, "n5")))
	c.put(source.ShardResource, shardObject(t, "cluster-2-2", shardSpec(2, 2, 4), nodesStatus(1, "n0")))
	c.put(source.ShardResource, shardObject(t, "cluster-2-3", shardSpec(2, 3, 4), nodesStatus(3)))
	second := c.waitFor("generation 2 whole", func(s *source.Snapshot) bool {
		return s.Report != nil && s.Report.Updated == updatedAt(t, "2025-01-02T03:05:05Z")
	})
	if second.Report.Nodes.Len() != 3 || second.Report.Nodes.Get("n4") != nil || second.Report.Nodes.Get("n5") == nil {
		t.Errorf("generation 2: %d nodes", second.Report.Nodes.Len())
	}
}

func TestInlineReportServedUntilShardsWhole(t *testing.T) {
	c := newCluster(t, reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": [
		{"name": "n1", "level": "High", "score": 90}]}`))
	c.run()
	inline := c.waitFor("the inline report", func(s *source.Snapshot) bool { return s.Report != nil })
	c.put(source.ReportResource, reportObject(t, "cluster", `{"lastUpdateTime": "2025-01-02T03:05:05Z",
		"shards": {"generation": 1, "count": 1, "versions": [1]}}`))
	c.heard("shards: report generation 1 is incomplete", 1)
	c.put(source.ShardResource, shardObject(t, "cluster-1-0", shardSpec(1, 0, 1), ""))
	c.heard("shards: report generation 1 is incomplete", 2)
	if snap := c.src.Snapshot(); snap.Report == nil || snap.Report.Updated != inline.Report.Updated || snap.Report.Nodes.Get("n1") == nil {
		t.Errorf("turning sharded: %+v, want the inline report until the shards are whole", snap)
	}
	c.put(source.ShardResource, shardObject(t, "cluster-1-0", shardSpec(1, 0, 1), nodesStatus(1, "n7")))
	snap := c.waitFor("sharded", func(s *source.Snapshot) bool { return s.Report != nil && s.Report.Nodes.Get("n7") != nil })
	if snap.Report.Nodes.Len() != 1 || snap.Report.Nodes.Get("n1") != nil {
		t.Errorf("sharded: %d nodes", snap.Report.Nodes.Len())
	}
}

func TestSourceWaitSynced(t *testing.T) {
	c := newCluster(t)
	if c.src.WaitSynced(10 * time.Millisecond) {
		t.Error("synced before running")
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.src.Run(stop)
	if !c.src.WaitSynced(deadline) {
		t.Errorf("not synced within %v", deadline)
	}
}
