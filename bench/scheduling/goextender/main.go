// A minimal kube-scheduler HTTP extender written on kube-scheduler's own extender types
// (k8s.io/kube-scheduler/extender/v1) and encoding/json, answering the same filter and
// prioritize as MCO's /kube routes from the same standalone report file. It exists only to
// compare server CPU per request with `mco extender` (bench/scheduling/run.py); it is not a
// part of MCO. It also answers Volcano's extender plugin (/volcano/v1.10/predicate and
// /prioritize, the v1.10 reply format) with the same rules, decoding the Pod and Node into
// k8s.io/api types, so the bench can tell Volcano's own cost of calling an extender from ours.
//
// Rules, as MCO's policy with its defaults: a pod whose runtimeClassName starts with "kata"
// fits only nodes labelled katacontainers.io/kata-runtime=true; a node whose report signals
// exceed psiMemoryFullAvg10 > 0 or psiIoSomeAvg10 > 20 fails (Unknown or absent nodes pass);
// the score is round((100 - score) / 10), 5 for Unknown or absent nodes.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

type node struct {
	Name    string             `json:"name"`
	Level   string             `json:"level"`
	Score   float64            `json:"score"`
	Signals map[string]float64 `json:"signals"`
}

type document struct {
	Status struct {
		Nodes []node `json:"nodes"`
	} `json:"status"`
}

type reportCache struct {
	mu      sync.RWMutex
	path    string
	modTime time.Time
	byName  map[string]node
}

func (c *reportCache) get() map[string]node {
	st, err := os.Stat(c.path)
	c.mu.RLock()
	fresh := err == nil && st.ModTime().Equal(c.modTime)
	byName := c.byName
	c.mu.RUnlock()
	if fresh || err != nil {
		return byName
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return byName
	}
	var doc document
	if err := json.Unmarshal(data, &doc); err != nil {
		return byName
	}
	fresh2 := make(map[string]node, len(doc.Status.Nodes))
	for _, n := range doc.Status.Nodes {
		fresh2[n.Name] = n
	}
	c.mu.Lock()
	c.byName, c.modTime = fresh2, st.ModTime()
	c.mu.Unlock()
	return fresh2
}

var constraints = map[string]float64{"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10": 20.0}

func failure(pod *v1.Pod, n *v1.Node, report map[string]node) string {
	if pod != nil && pod.Spec.RuntimeClassName != nil && strings.HasPrefix(*pod.Spec.RuntimeClassName, "kata") {
		if n != nil && n.Labels["katacontainers.io/kata-runtime"] != "true" {
			return "node has no label katacontainers.io/kata-runtime=true"
		}
	}
	name := ""
	if n != nil {
		name = n.Name
	}
	entry, ok := report[name]
	if !ok || entry.Level == "Unknown" {
		return ""
	}
	for signal, limit := range constraints {
		if v, ok := entry.Signals[signal]; ok && v > limit {
			return signal + " over its threshold"
		}
	}
	return ""
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9890", "listen address")
	reportFile := flag.String("report", "/var/lib/mco/report.json", "standalone report file")
	flag.Parse()
	cache := &reportCache{path: *reportFile}

	http.HandleFunc("/kube/filter", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			_ = json.NewEncoder(w).Encode(&extenderv1.ExtenderFilterResult{Error: err.Error()})
			return
		}
		report := cache.get()
		result := extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}}
		if args.Nodes != nil {
			kept := &v1.NodeList{}
			for i := range args.Nodes.Items {
				n := &args.Nodes.Items[i]
				if reason := failure(args.Pod, n, report); reason != "" {
					result.FailedNodes[n.Name] = reason
				} else {
					kept.Items = append(kept.Items, *n)
				}
			}
			result.Nodes = kept
		}
		if args.NodeNames != nil {
			names := []string{}
			for _, name := range *args.NodeNames {
				if reason := failure(args.Pod, &v1.Node{ObjectMeta: metaName(name)}, report); reason != "" {
					result.FailedNodes[name] = reason
				} else {
					names = append(names, name)
				}
			}
			result.NodeNames = &names
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&result)
	})

	http.HandleFunc("/kube/prioritize", func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			_ = json.NewEncoder(w).Encode(extenderv1.HostPriorityList{})
			return
		}
		report := cache.get()
		names := []string{}
		if args.Nodes != nil {
			for _, n := range args.Nodes.Items {
				names = append(names, n.Name)
			}
		} else if args.NodeNames != nil {
			names = *args.NodeNames
		}
		out := make(extenderv1.HostPriorityList, 0, len(names))
		for _, name := range names {
			score := int64(5)
			if entry, ok := report[name]; ok && entry.Level != "Unknown" {
				score = int64(math.Round((100 - entry.Score) / 10))
			}
			out = append(out, extenderv1.HostPriority{Host: name, Score: score})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})

	http.HandleFunc("/volcano/v1.10/predicate", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Task *struct{ Pod *v1.Pod }
			Node *struct {
				Name string
				Node *v1.Node
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Task == nil || req.Node == nil {
			_, _ = w.Write([]byte("{}")) // fail open: a pass
			return
		}
		n := req.Node.Node
		if n == nil {
			n = &v1.Node{ObjectMeta: metaName(req.Node.Name)}
		}
		if reason := failure(req.Task.Pod, n, cache.get()); reason != "" {
			_ = json.NewEncoder(w).Encode(map[string]any{"status": reason, "code": 2})
			return
		}
		_, _ = w.Write([]byte("{}"))
	})

	http.HandleFunc("/volcano/v1.10/prioritize", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Task  *struct{ Pod *v1.Pod }
			Nodes []struct{ Name string }
		}
		scores := map[string]float64{}
		if err := json.NewDecoder(r.Body).Decode(&req); err == nil {
			report := cache.get()
			for _, n := range req.Nodes {
				score := 50.0
				if entry, ok := report[n.Name]; ok && entry.Level != "Unknown" {
					score = math.Max(0, 100-entry.Score)
				}
				scores[n.Name] = score
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"nodeScore": scores, "errorMessage": ""})
	})

	log.Printf("go extender on %s, report %s", *listen, *reportFile)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
