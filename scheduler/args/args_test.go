// SPDX-License-Identifier: MulanPSL-2.0

package args_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v2"

	"mco.many-core.io/scheduler/args"
	"mco.many-core.io/scheduler/policy"
)

// fromYAML decodes arguments as Volcano hands them over: yaml.v2 into a map with string keys,
// nested maps with interface{} keys, integers as int.
func fromYAML(t testing.TB, text string) map[string]interface{} {
	t.Helper()
	raw := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("yaml %q: %v", text, err)
	}
	return raw
}

// fromJSON decodes arguments as kube-scheduler's pluginConfig hands them over: numbers as float64.
func fromJSON(t testing.TB, text string) map[string]interface{} {
	t.Helper()
	raw := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("json %q: %v", text, err)
	}
	return raw
}

func signal(t testing.TB, name string) int {
	t.Helper()
	i, ok := policy.SignalIndex(name)
	if !ok {
		t.Fatalf("no signal %s", name)
	}
	return i
}

// on is a constraint on signal i at threshold.
func on(i int, threshold float64) policy.Constraint {
	return policy.Constraint{Signal: i, Threshold: threshold}
}

func problemKeys(problems []args.Problem) []string {
	keys := []string{}
	for _, p := range problems {
		keys = append(keys, p.Key)
	}
	return keys
}

func TestDefaults(t *testing.T) {
	want := args.Args{
		CRName: "cluster",
		Settings: policy.Settings{
			TTLSeconds:           30,
			HardConstraints:      []policy.Constraint{{Signal: signal(t, "psiMemoryFullAvg10"), Threshold: 0}, {Signal: signal(t, "psiIoSomeAvg10"), Threshold: 20}},
			FallbackWhenOutdated: true,
			KataPrefixes:         []string{"kata"},
			ScoreWeight:          1,
			UnknownScore:         50,
			MaxClockSkewSeconds:  5,
			Herd:                 policy.HerdGuard{Enabled: true, PerPodScore: 5, SettleSeconds: 10, MaxAgeSeconds: 60},
		},
	}
	for name, raw := range map[string]map[string]interface{}{
		"nil":         nil,
		"empty":       {},
		"empty yaml":  fromYAML(t, "{}"),
		"crName null": fromYAML(t, "crName: null"),
	} {
		got, problems := args.Parse(raw)
		if len(problems) != 0 {
			t.Errorf("%s: problems %v", name, problems)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

func TestEveryKeyYAMLAndJSON(t *testing.T) {
	const yamlText = `
crName: nodes-east
crStatusTTLSeconds: 45
fallbackWhenCROutdated: false
hardConstraints:
  psiCpuSomeAvg10: 70
  bioLatencyP99Ms: 12.5
kataRuntimeClassPrefixes: [kata, rund]
scoreWeight: 2.5
unknownScore: 0
maxClockSkewSeconds: 0
herdGuard: {enabled: true, perPodScore: 2, settleSeconds: 0, maxAgeSeconds: 30}
`
	const jsonText = `{"crName": "nodes-east", "crStatusTTLSeconds": 45, "fallbackWhenCROutdated": false,
		"hardConstraints": {"psiCpuSomeAvg10": 70, "bioLatencyP99Ms": 12.5},
		"kataRuntimeClassPrefixes": ["kata", "rund"], "scoreWeight": 2.5, "unknownScore": 0, "maxClockSkewSeconds": 0,
		"herdGuard": {"enabled": true, "perPodScore": 2, "settleSeconds": 0, "maxAgeSeconds": 30}}`
	want := args.Args{
		CRName: "nodes-east",
		Settings: policy.Settings{
			TTLSeconds:           45,
			HardConstraints:      []policy.Constraint{{Signal: signal(t, "psiCpuSomeAvg10"), Threshold: 70}, {Signal: signal(t, "bioLatencyP99Ms"), Threshold: 12.5}},
			FallbackWhenOutdated: false,
			KataPrefixes:         []string{"kata", "rund"},
			ScoreWeight:          2.5,
			UnknownScore:         0,
			MaxClockSkewSeconds:  0,
			Herd:                 policy.HerdGuard{Enabled: true, PerPodScore: 2, SettleSeconds: 0, MaxAgeSeconds: 30},
		},
	}
	for name, raw := range map[string]map[string]interface{}{"yaml": fromYAML(t, yamlText), "json": fromJSON(t, jsonText)} {
		got, problems := args.Parse(raw)
		if len(problems) != 0 {
			t.Errorf("%s: problems %v", name, problems)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

func TestHardConstraints(t *testing.T) {
	io, mem, cpu := signal(t, "psiIoSomeAvg10"), signal(t, "psiMemoryFullAvg10"), signal(t, "psiCpuSomeAvg10")
	cases := []struct {
		name     string
		yaml     string
		want     []policy.Constraint
		problems []string
	}{
		{"suffix Threshold", "hardConstraints: {psiIoSomeAvg10Threshold: 35}", []policy.Constraint{on(io, 35)}, nil},
		{"null: every constraint off", "hardConstraints: null", nil, nil},
		{"empty mapping: every constraint off", "hardConstraints: {}", []policy.Constraint{}, nil},
		{"null value: that constraint off", "hardConstraints: {psiIoSomeAvg10: null, psiCpuSomeAvg10: 5}", []policy.Constraint{on(cpu, 5)}, nil},
		{"negative threshold is allowed", "hardConstraints: {psiCpuSomeAvg10: -1}", []policy.Constraint{on(cpu, -1)}, nil},
		{"unknown signal ignored", "hardConstraints: {psiBogus: 5, psiCpuSomeAvg10: 5}",
			[]policy.Constraint{on(cpu, 5)}, []string{"hardConstraints.psiBogus"}},
		{"bare Threshold is no signal", "hardConstraints: {Threshold: 5}", []policy.Constraint{}, []string{"hardConstraints.Threshold"}},
		{"bad threshold of a signal with a default: the default",
			"hardConstraints: {psiIoSomeAvg10: high, psiMemoryFullAvg10Threshold: .inf}",
			[]policy.Constraint{on(mem, 0), on(io, 20)}, []string{"hardConstraints.psiIoSomeAvg10", "hardConstraints.psiMemoryFullAvg10Threshold"}},
		{"bad threshold of a signal without a default: off",
			"hardConstraints: {psiCpuSomeAvg10: true, psiIoSomeAvg10: 7}",
			[]policy.Constraint{on(io, 7)}, []string{"hardConstraints.psiCpuSomeAvg10"}},
		{"a list is not a mapping", "hardConstraints: [psiIoSomeAvg10]",
			policy.DefaultSettings().HardConstraints, []string{"hardConstraints"}},
		{"a number is not a mapping", "hardConstraints: 20",
			policy.DefaultSettings().HardConstraints, []string{"hardConstraints"}},
		{"keys must be strings", "hardConstraints: {1: 2}",
			policy.DefaultSettings().HardConstraints, []string{"hardConstraints"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, problems := args.Parse(fromYAML(t, c.yaml))
			if !reflect.DeepEqual(got.Settings.HardConstraints, c.want) {
				t.Errorf("constraints %v, want %v", got.Settings.HardConstraints, c.want)
			}
			if keys := problemKeys(problems); !reflect.DeepEqual(keys, append([]string{}, c.problems...)) {
				t.Errorf("problems %v, want keys %v", problems, c.problems)
			}
		})
	}
}

func TestBadThresholdSaysWhatStands(t *testing.T) {
	_, problems := args.Parse(fromYAML(t, "hardConstraints: {psiIoSomeAvg10: high, psiCpuSomeAvg10: [1]}"))
	texts := map[string]string{}
	for _, p := range problems {
		texts[p.Key] = p.Text
	}
	if text := texts["hardConstraints.psiIoSomeAvg10"]; !strings.HasSuffix(text, "; using 20") {
		t.Errorf("psiIoSomeAvg10: %q", text)
	}
	if text := texts["hardConstraints.psiCpuSomeAvg10"]; !strings.HasSuffix(text, "; the constraint is off") {
		t.Errorf("psiCpuSomeAvg10: %q", text)
	}
}

func TestConstraintsInSignalOrder(t *testing.T) {
	// Written in reverse SignalNames order, in both decoders.
	var yamlText, jsonParts []string
	for i := policy.NumSignals - 1; i >= 0; i-- {
		yamlText = append(yamlText, "  "+policy.SignalNames[i]+"Threshold: 1")
		jsonParts = append(jsonParts, `"`+policy.SignalNames[i]+`": 1`)
	}
	for name, raw := range map[string]map[string]interface{}{
		"yaml": fromYAML(t, "hardConstraints:\n"+strings.Join(yamlText, "\n")),
		"json": fromJSON(t, `{"hardConstraints": {`+strings.Join(jsonParts, ", ")+`}}`),
	} {
		got, problems := args.Parse(raw)
		if len(problems) != 0 {
			t.Fatalf("%s: problems %v", name, problems)
		}
		if len(got.Settings.HardConstraints) != policy.NumSignals {
			t.Fatalf("%s: %d constraints, want %d", name, len(got.Settings.HardConstraints), policy.NumSignals)
		}
		for i, c := range got.Settings.HardConstraints {
			if c.Signal != i || c.Threshold != 1 {
				t.Errorf("%s: constraint %d is %v, want {%d 1}", name, i, c, i)
			}
		}
	}
}

func TestWrongValueKeepsDefault(t *testing.T) {
	cases := []struct {
		key  string
		yaml string // "" when YAML cannot say it
		json string // "" when JSON cannot say it
	}{
		{"crName", "crName: 5", `{"crName": 5}`},
		{"crName", `crName: ""`, `{"crName": ""}`},
		{"crName", "crName: [a]", `{"crName": ["a"]}`},
		{"crStatusTTLSeconds", `crStatusTTLSeconds: "30"`, `{"crStatusTTLSeconds": "30"}`},
		{"crStatusTTLSeconds", "crStatusTTLSeconds: 0", `{"crStatusTTLSeconds": 0}`},
		{"crStatusTTLSeconds", "crStatusTTLSeconds: -1", `{"crStatusTTLSeconds": -1}`},
		{"crStatusTTLSeconds", "crStatusTTLSeconds: .inf", ""},
		{"crStatusTTLSeconds", "crStatusTTLSeconds: null", `{"crStatusTTLSeconds": null}`},
		{"scoreWeight", "scoreWeight: true", `{"scoreWeight": true}`},
		{"scoreWeight", "scoreWeight: -0.5", `{"scoreWeight": -0.5}`},
		{"scoreWeight", "scoreWeight: .nan", ""},
		{"scoreWeight", "scoreWeight: -.inf", ""},
		{"unknownScore", "unknownScore: [1, 2]", `{"unknownScore": [1, 2]}`},
		{"unknownScore", "unknownScore: 101", `{"unknownScore": 101}`},
		{"unknownScore", "unknownScore: -0.1", `{"unknownScore": -0.1}`},
		{"maxClockSkewSeconds", "maxClockSkewSeconds: {a: 1}", `{"maxClockSkewSeconds": {"a": 1}}`},
		{"maxClockSkewSeconds", "maxClockSkewSeconds: -1", `{"maxClockSkewSeconds": -1}`},
		{"fallbackWhenCROutdated", `fallbackWhenCROutdated: "true"`, `{"fallbackWhenCROutdated": "true"}`},
		{"fallbackWhenCROutdated", "fallbackWhenCROutdated: 1", `{"fallbackWhenCROutdated": 1}`},
		{"fallbackWhenCROutdated", "fallbackWhenCROutdated: null", `{"fallbackWhenCROutdated": null}`},
		{"kataRuntimeClassPrefixes", "kataRuntimeClassPrefixes: kata", `{"kataRuntimeClassPrefixes": "kata"}`},
		{"kataRuntimeClassPrefixes", `kataRuntimeClassPrefixes: [kata, ""]`, `{"kataRuntimeClassPrefixes": ["kata", ""]}`},
		{"kataRuntimeClassPrefixes", "kataRuntimeClassPrefixes: [1]", `{"kataRuntimeClassPrefixes": [1]}`},
		{"kataRuntimeClassPrefixes", "kataRuntimeClassPrefixes: {kata: true}", `{"kataRuntimeClassPrefixes": {"kata": true}}`},
		{"crname", "crname: typo", `{"crname": "typo"}`},
	}
	for _, c := range cases {
		for decoder, text := range map[string]string{"yaml": c.yaml, "json": c.json} {
			if text == "" {
				continue
			}
			var raw map[string]interface{}
			if decoder == "yaml" {
				raw = fromYAML(t, text)
			} else {
				raw = fromJSON(t, text)
			}
			got, problems := args.Parse(raw)
			if keys := problemKeys(problems); !reflect.DeepEqual(keys, []string{c.key}) {
				t.Errorf("%s %s: problems %v, want one for %s", decoder, text, problems, c.key)
			}
			if !reflect.DeepEqual(got, args.Defaults()) {
				t.Errorf("%s %s: got %+v, want the defaults", decoder, text, got)
			}
		}
	}
}

func TestProblemTexts(t *testing.T) {
	cases := []struct {
		yaml string
		want string
	}{
		{"crStatusTTLSeconds: 0", "crStatusTTLSeconds: must be above 0, got 0; using 30"},
		{"unknownScore: 101", "unknownScore: must be within 0-100, got 101; using 50"},
		{"scoreWeight: -2", "scoreWeight: must be at least 0, got -2; using 1"},
		{"crStatusTTLSeconds: .inf", "crStatusTTLSeconds: expected a number, got +Inf; using 30"},
		{`fallbackWhenCROutdated: "true"`, `fallbackWhenCROutdated: expected true or false, got "true"; using true`},
		{"crName: ''", "crName: must not be empty; using cluster"},
		{"hardConstraints: {psiBogus: 1}", "hardConstraints.psiBogus: unknown signal; use one of " +
			strings.Join(policy.SignalNames[:], ", ") + " (optionally with the suffix 'Threshold'); ignored"},
		{"bogus: 1", "bogus: unknown argument (known: crName, crStatusTTLSeconds, fallbackWhenCROutdated, " +
			"hardConstraints, herdGuard, kataRuntimeClassPrefixes, maxClockSkewSeconds, scoreWeight, unknownScore); ignored"},
	}
	for _, c := range cases {
		_, problems := args.Parse(fromYAML(t, c.yaml))
		if len(problems) != 1 || problems[0].String() != c.want {
			t.Errorf("%s:\n got %v\nwant [%s]", c.yaml, problems, c.want)
		}
	}
}

func TestUnknownKeyDoesNotStopTheRest(t *testing.T) {
	got, problems := args.Parse(fromYAML(t, "crNmae: east\ncrStatusTTLSeconds: 10\nttl: 5"))
	if keys := problemKeys(problems); !reflect.DeepEqual(keys, []string{"crNmae", "ttl"}) {
		t.Errorf("problems %v", problems)
	}
	if got.CRName != "cluster" || got.Settings.TTLSeconds != 10 {
		t.Errorf("got %+v", got)
	}
}

func TestBoundariesAccepted(t *testing.T) {
	got, problems := args.Parse(fromYAML(t, "unknownScore: 100\nscoreWeight: 0\ncrStatusTTLSeconds: 0.001\nkataRuntimeClassPrefixes: null"))
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	s := got.Settings
	if s.UnknownScore != 100 || s.ScoreWeight != 0 || s.TTLSeconds != 0.001 || len(s.KataPrefixes) != 0 {
		t.Errorf("got %+v", s)
	}
	if policy.NeedsKata("kata-qemu", &s) {
		t.Error("kataRuntimeClassPrefixes: null still needs Kata nodes")
	}
}

func TestNumber(t *testing.T) {
	for _, v := range []interface{}{int(3), int32(3), int64(3), uint(3), uint64(3), float32(3), float64(3)} {
		if n, ok := args.Number(v); !ok || n != 3 {
			t.Errorf("Number(%T 3) = %v, %v", v, n, ok)
		}
	}
	for _, v := range []interface{}{true, "3", nil, []interface{}{3}} {
		if _, ok := args.Number(v); ok {
			t.Errorf("Number(%#v) is a number", v)
		}
	}
}

func TestMapping(t *testing.T) {
	m, ok := args.Mapping(map[interface{}]interface{}{"crName": "x"})
	if !ok || m["crName"] != "x" {
		t.Errorf("Mapping(yaml map) = %v, %v", m, ok)
	}
	if _, ok := args.Mapping(map[interface{}]interface{}{1: "x"}); ok {
		t.Error("a map with an int key is a mapping")
	}
	if _, ok := args.Mapping([]interface{}{}); ok {
		t.Error("a list is a mapping")
	}
}

// FuzzParse: whatever YAML the ConfigMap holds, Parse does not panic and the settings are usable.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"crName: cluster\ncrStatusTTLSeconds: 30\nfallbackWhenCROutdated: true",
		"hardConstraints: {psiMemoryFullAvg10: 0.0, psiIoSomeAvg10Threshold: 20.0}",
		"hardConstraints: null",
		"hardConstraints: {psiIoSomeAvg10: .nan, psiCpuSomeAvg10: .inf, x: [1]}",
		"kataRuntimeClassPrefixes: [kata, '', 3]\nscoreWeight: -.inf\nunknownScore: 1e400",
		"crStatusTTLSeconds: 18446744073709551615\nmaxClockSkewSeconds: -9223372036854775808",
		"hardConstraints: {1: 2, ? [a] : b}",
		"a: &x [1, 2]\nb: *x\nunknownScore: !!float 12",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		raw := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
			return
		}
		got, _ := args.Parse(raw)
		s := got.Settings
		finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
		if got.CRName == "" {
			t.Error("empty crName")
		}
		if !finite(s.TTLSeconds) || s.TTLSeconds <= 0 {
			t.Errorf("TTLSeconds %v", s.TTLSeconds)
		}
		if !finite(s.UnknownScore) || s.UnknownScore < 0 || s.UnknownScore > 100 {
			t.Errorf("UnknownScore %v", s.UnknownScore)
		}
		if !finite(s.ScoreWeight) || s.ScoreWeight < 0 {
			t.Errorf("ScoreWeight %v", s.ScoreWeight)
		}
		if !finite(s.MaxClockSkewSeconds) || s.MaxClockSkewSeconds < 0 {
			t.Errorf("MaxClockSkewSeconds %v", s.MaxClockSkewSeconds)
		}
		last := -1
		for _, c := range s.HardConstraints {
			if c.Signal <= last || c.Signal >= policy.NumSignals || !finite(c.Threshold) {
				t.Errorf("constraints %v", s.HardConstraints)
			}
			last = c.Signal
		}
		for _, p := range s.KataPrefixes {
			if p == "" {
				t.Errorf("empty Kata prefix in %q", s.KataPrefixes)
			}
		}
	})
}

func TestHerdGuard(t *testing.T) {
	defaults := policy.DefaultHerdGuard()
	off := defaults
	off.Enabled = false
	for _, c := range []struct {
		name     string
		yaml     string
		want     policy.HerdGuard
		problems []string
	}{
		{"null switches it off", "herdGuard: null", off, nil},
		{"enabled false", "herdGuard: {enabled: false}", off, nil},
		{"one field", "herdGuard: {perPodScore: 12}", policy.HerdGuard{Enabled: true, PerPodScore: 12, SettleSeconds: 10, MaxAgeSeconds: 60}, nil},
		{"not a mapping", "herdGuard: yes", defaults, []string{"herdGuard"}},
		{"enabled not a bool", "herdGuard: {enabled: 1}", defaults, []string{"herdGuard.enabled"}},
		{"zero per pod", "herdGuard: {perPodScore: 0}", defaults, []string{"herdGuard.perPodScore"}},
		{"per pod above 100", "herdGuard: {perPodScore: 101}", defaults, []string{"herdGuard.perPodScore"}},
		{"negative settle", "herdGuard: {settleSeconds: -1}", defaults, []string{"herdGuard.settleSeconds"}},
		{"zero max age", "herdGuard: {maxAgeSeconds: 0, perPodScore: 3}", policy.HerdGuard{Enabled: true, PerPodScore: 3, SettleSeconds: 10, MaxAgeSeconds: 60}, []string{"herdGuard.maxAgeSeconds"}},
		{"unknown key", "herdGuard: {perPod: 3}", defaults, []string{"herdGuard.perPod"}},
	} {
		got, problems := args.Parse(fromYAML(t, c.yaml))
		if got.Settings.Herd != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got.Settings.Herd, c.want)
		}
		if keys := problemKeys(problems); !reflect.DeepEqual(keys, append([]string{}, c.problems...)) {
			t.Errorf("%s: problems %v, want keys %v", c.name, problems, c.problems)
		}
	}
	_, problems := args.Parse(fromYAML(t, "herdGuard: {perPodScore: 0}"))
	if len(problems) != 1 || !strings.Contains(problems[0].Text, "enabled: false") {
		t.Errorf("a zero perPodScore should say how to switch the guard off: %v", problems)
	}
}
