// SPDX-License-Identifier: MulanPSL-2.0

package metrics

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

type logLine struct {
	Msg        string `json:"msg"`
	Kind       string `json:"kind"`
	Suppressed int    `json:"suppressedSinceLast"`
}

// captureLogs sends klog's lines to the returned function for the rest of the test.
func captureLogs(t *testing.T) func() []logLine {
	var mu sync.Mutex
	var lines []logLine
	klog.SetLogger(funcr.NewJSON(func(obj string) {
		var line logLine
		if err := json.Unmarshal([]byte(obj), &line); err != nil {
			t.Errorf("log line %s: %v", obj, err)
		}
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, line)
	}, funcr.Options{}))
	t.Cleanup(klog.ClearLogger)
	return func() []logLine {
		mu.Lock()
		defer mu.Unlock()
		return append([]logLine(nil), lines...)
	}
}

// rewind makes the last log line of kind as old as ago.
func (m *Metrics) rewind(kind string, ago time.Duration) {
	m.logMu.Lock()
	defer m.logMu.Unlock()
	m.logged[kind] = m.logged[kind].Add(-ago)
}

func TestProblemLogsOncePerIntervalPerKind(t *testing.T) {
	logs := captureLogs(t)
	m := New(time.Minute)
	m.Problem("watch", "refused 1")
	m.Problem("watch", "refused 2")
	m.Problem("shards", "incomplete")
	m.Problem("watch", "refused 3")
	want := []logLine{
		{Msg: "mco-plugin: refused 1", Kind: "watch"},
		{Msg: "mco-plugin: incomplete", Kind: "shards"},
	}
	if got := logs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("within the interval:\n got %+v\nwant %+v", got, want)
	}

	m.rewind("watch", time.Minute+time.Second)
	m.Problem("watch", "refused 4")
	m.Problem("watch", "refused 5")
	want = append(want, logLine{Msg: "mco-plugin: refused 4", Kind: "watch", Suppressed: 2})
	if got := logs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the interval:\n got %+v\nwant %+v", got, want)
	}
	if n := m.problems["watch"].Load(); n != 5 {
		t.Errorf("%d watch problems counted, want 5 (logged or not)", n)
	}

	m.rewind("watch", time.Minute+time.Second)
	m.Problem("watch", "refused 6")
	if got := logs(); got[len(got)-1] != (logLine{Msg: "mco-plugin: refused 6", Kind: "watch", Suppressed: 1}) {
		t.Errorf("the count restarts after each line: %+v", got[len(got)-1])
	}
}

func TestProblemWithoutIntervalLogsEveryOne(t *testing.T) {
	logs := captureLogs(t)
	m := New(0)
	for i := 0; i < 3; i++ {
		m.Problem("hint", "bad")
	}
	if got := logs(); len(got) != 3 {
		t.Errorf("%d lines, want 3: %+v", len(got), got)
	}
}
