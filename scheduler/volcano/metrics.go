// SPDX-License-Identifier: MulanPSL-2.0

package volcano

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"mco.many-core.io/scheduler/metrics"
)

// registerMetrics puts the counters on the registry vc-scheduler serves at --listen-address.
func registerMetrics(m *metrics.Metrics) {
	if err := prometheus.DefaultRegisterer.Register(m); err != nil {
		klog.ErrorS(err, "mco-plugin: metrics not registered; scheduling goes on without them")
	}
}
