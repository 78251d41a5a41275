// SPDX-License-Identifier: MulanPSL-2.0

// Package core is what both scheduler plugins share for the life of the process: one report
// source per report name (its informers started once, stopped never), the metrics, and the
// sensitive-to hints already read. Schedulers build plugin objects often (Volcano: every
// session); everything that must outlive one lives here.
package core

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/metrics"
	"mco.many-core.io/scheduler/policy"
	"mco.many-core.io/scheduler/source"
)

// LogInterval is the least time between two log lines of one kind of problem.
const LogInterval = time.Minute

// Shared is one process's state.
type Shared struct {
	Metrics *metrics.Metrics
	// Herd holds the recent placements the herd guard counts.
	Herd *Ledger

	mu      sync.Mutex
	sources map[string]*source.Source
	stop    chan struct{}

	hintsMu sync.RWMutex
	hints   map[string]hint

	current atomic.Pointer[inForce]
}

type hint struct {
	sensitivity *policy.Sensitivity
	problem     string
}

type inForce struct {
	source   *source.Source
	settings policy.Settings
}

// New makes a process's shared state (one per process: see the plugin packages).
func New() *Shared {
	s := &Shared{Metrics: metrics.New(LogInterval), Herd: NewLedger(), sources: map[string]*source.Source{}, stop: make(chan struct{}), hints: map[string]hint{}}
	s.Metrics.SetState(s.stateNow)
	s.Metrics.SetHeld(s.Herd.Len)
	return s
}

// Source is the report source for crName, started on first use with a client made from cfg; nil
// (fallback) when no client can be made.
func (s *Shared) Source(cfg *rest.Config, crName string) *source.Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.sources[crName]; ok {
		return src
	}
	if cfg == nil {
		s.Metrics.Problem("watch", "no API client configuration: scheduling without the report")
		return nil
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		s.Metrics.Problem("watch", "cannot make an API client: "+err.Error()+"; scheduling without the report")
		return nil
	}
	src := source.NewSource(client, crName, s.Metrics.Problem)
	src.Run(s.stop)
	s.sources[crName] = src
	return src
}

// Arguments parses a plugin's arguments, counting and logging (rate-limited) what was replaced
// by its default.
func (s *Shared) Arguments(raw map[string]interface{}) args.Args {
	parsed, problems := args.Parse(raw)
	for _, p := range problems {
		s.Metrics.Problem("argument", "argument "+p.String())
	}
	return parsed
}

// View is the report as one scheduling cycle sees it.
type View struct {
	State    policy.State
	Settings *policy.Settings
}

// Look decides the report state now under settings, and makes it the state /metrics shows.
func (s *Shared) Look(src *source.Source, settings policy.Settings, now time.Time) View {
	s.current.Store(&inForce{source: src, settings: settings})
	return View{State: decide(src, &settings, now), Settings: &settings}
}

func decide(src *source.Source, settings *policy.Settings, now time.Time) policy.State {
	seconds := float64(now.UnixMicro()) / 1e6
	if src == nil {
		return policy.ReportState(nil, seconds, settings, "no report source (see the plugin's log)", false)
	}
	snap := src.Snapshot()
	return policy.ReportState(snap.Report, seconds, settings, snap.Problem, snap.Unreadable)
}

func (s *Shared) stateNow() (policy.State, int) {
	cur := s.current.Load()
	if cur == nil {
		defaults := policy.DefaultSettings()
		return policy.ReportState(nil, 0, &defaults, "no scheduling cycle yet", false), 0
	}
	state := decide(cur.source, &cur.settings, time.Now())
	if state.Report == nil {
		return state, 0
	}
	return state, state.Report.Nodes.Len()
}

// Sensitivity is a pod's sensitive-to weights (nil: score by the node score) and the score
// reason, for a pod whose annotation is text (present false: none).
func (s *Shared) Sensitivity(state *policy.State, text string, present bool) (*policy.Sensitivity, metrics.ScoreReason) {
	if state.BasicMode() {
		return nil, metrics.ScoreFallback
	}
	if !present {
		return nil, metrics.ScoreReport
	}
	s.hintsMu.RLock()
	h, seen := s.hints[text]
	s.hintsMu.RUnlock()
	if !seen {
		sensitivity, err := policy.ParseSensitivity(text)
		h = hint{sensitivity: sensitivity}
		if err != nil {
			h.problem = err.Error()
		}
		s.hintsMu.Lock()
		if len(s.hints) >= 256 { // a stranger's annotations cannot grow it
			s.hints = map[string]hint{}
		}
		s.hints[text] = h
		s.hintsMu.Unlock()
	}
	if h.problem != "" {
		s.Metrics.Problem("hint", "annotation "+policy.SensitiveToAnnotation+" "+h.problem+"; scored by node level")
		return nil, metrics.ScoreInvalidHint
	}
	return h.sensitivity, metrics.ScoreDimensions
}
