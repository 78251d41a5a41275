// SPDX-License-Identifier: MulanPSL-2.0

package volcano

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"volcano.sh/volcano/pkg/scheduler/api"

	"mco.many-core.io/scheduler/core"
)

// BenchmarkInFlight is one session open's scan of the tasks in flight on a cluster of 5,000 nodes
// with 20 running pods each, bound an hour ago (none counts), with the herd guard on.
func BenchmarkInFlight(b *testing.B) {
	f, _ := burstSession(b, core.New(), true)
	bound := metav1.NewTime(time.UnixMicro(int64((now - 3600) * 1e6)))
	nodes := map[string]*api.NodeInfo{}
	for n := 0; n < 5000; n++ {
		name := "node-" + strconv.Itoa(n)
		ni := node(name, nil)
		for i := 0; i < 20; i++ {
			tk := cpuTask(n*20 + i)
			tk.NodeName, tk.Status = name, api.Running
			tk.Pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: bound}}
			ni.Tasks[api.PodKey(tk.Pod)] = tk
		}
		nodes[name] = ni
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.inFlight(nodes)
	}
}
