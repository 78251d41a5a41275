// SPDX-License-Identifier: MulanPSL-2.0

package kube

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"mco.many-core.io/scheduler/report"
	"mco.many-core.io/scheduler/source"
)

func TestEventsToRegister(t *testing.T) {
	p, _ := plugin(t, false, nil)
	events, err := p.EventsToRegister(ctx)
	if err != nil || len(events) != 2 {
		t.Fatalf("events %+v, %v", events, err)
	}
	// kube-scheduler names a custom resource's events <plural>.<version>.<group>.
	if want := fwk.EventResource(report.Plural + "." + report.Version + "." + report.Group); events[0].Event.Resource != want ||
		events[0].Event.ActionType != fwk.All || events[0].QueueingHintFn == nil {
		t.Errorf("report event %+v, want every change of %s with a hint", events[0].Event, want)
	}
	if e := events[1].Event; e.Resource != fwk.Node || e.ActionType != fwk.Add|fwk.UpdateNodeLabel {
		t.Errorf("node event %+v", e)
	}
}

func reportAt(name, version string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": report.Group + "/" + report.Version, "kind": "NodeInterferenceReport",
		"metadata": map[string]interface{}{"name": name},
		"status":   map[string]interface{}{"lastUpdateTime": "2025-01-02T03:04:05Z", "nodes": []interface{}{}},
	}}
	u.SetResourceVersion(version)
	return u
}

// withSource gives p a running source whose report object "cluster" is at resourceVersion 6.
func withSource(t *testing.T, p *Plugin) {
	t.Helper()
	client := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		source.ReportResource: "NodeInterferenceReportList",
		source.ShardResource:  "NodeInterferenceReportShardList",
	}, reportAt("cluster", "6"))
	p.src = source.NewSource(client, "cluster", nil)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	p.src.Run(stop)
	if !p.src.WaitFor("6", 5*time.Second) {
		t.Fatalf("source not at version 6: %+v", p.src.Snapshot())
	}
}

func hint(t *testing.T, p *Plugin, newObj interface{}) (fwk.QueueingHint, time.Duration) {
	t.Helper()
	start := time.Now()
	h, err := p.reportChanged(klog.Background(), pod("", ""), nil, newObj)
	if err != nil {
		t.Fatal(err)
	}
	return h, time.Since(start)
}

func TestReportChangedHint(t *testing.T) {
	p, _ := plugin(t, false, nil)
	if h, _ := hint(t, p, reportAt("cluster", "7")); h != fwk.Queue {
		t.Errorf("without a source: %v, want Queue", h)
	}
	withSource(t, p)
	if h, took := hint(t, p, reportAt("other", "7")); h != fwk.QueueSkip || took > 500*time.Millisecond {
		t.Errorf("another report: %v after %v, want QueueSkip at once", h, took)
	}
	if h, took := hint(t, p, reportAt("cluster", "6")); h != fwk.Queue || took > 500*time.Millisecond {
		t.Errorf("the version the source has: %v after %v, want Queue at once", h, took)
	}
}

func TestReportChangedHintOlderEvent(t *testing.T) {
	// kube-scheduler's informer may deliver version 5 after the plugin's has 6. Each pending pod
	// rejected by this plugin gets the hint, under the scheduling queue's lock.
	p, _ := plugin(t, false, nil)
	withSource(t, p)
	start := time.Now()
	for i := 0; i < 3; i++ {
		if h, _ := hint(t, p, reportAt("cluster", "5")); h != fwk.Queue {
			t.Errorf("hint %v, want Queue", h)
		}
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("three pods' hints for an older event took %v", took)
	}
}
