// SPDX-License-Identifier: MulanPSL-2.0

// kube-scheduler is Kubernetes' scheduler with mco-plugin registered: upstream's main
// (k8s.io/kubernetes/cmd/kube-scheduler) with app.WithPlugin. A profile enables the plugin.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"mco.many-core.io/scheduler/kube"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(kube.Name, kube.New))))
}
