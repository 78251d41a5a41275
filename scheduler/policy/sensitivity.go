// SPDX-License-Identifier: MulanPSL-2.0

package policy

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of one sensitive-to annotation.
const (
	MaxSensitivityItems = 8
	MaxSensitivityChars = 256
)

// Weight is one dimension a pod names, with its weight in (0, 1] (the largest is 1).
type Weight struct {
	Name   string
	Weight float64
}

// Sensitivity is the dimensions a pod's performance depends on.
type Sensitivity struct {
	Weights []Weight
}

// ParseSensitivity reads "cpu", "cpu,io" or "cpu=2,io=1" (relative weights); the error says what
// is wrong, in the words of the Python policy.
func ParseSensitivity(text string) (*Sensitivity, error) {
	if utf8.RuneCountInString(text) > MaxSensitivityChars {
		return nil, errors.New("longer than " + strconv.Itoa(MaxSensitivityChars) + " characters")
	}
	var items []string
	for _, part := range strings.Split(text, ",") {
		if item := pyStrip(part); item != "" {
			items = append(items, item)
		}
	}
	if len(items) == 0 {
		return nil, errors.New("names no dimension; write e.g. cpu,io or cpu=2,io=1")
	}
	if len(items) > MaxSensitivityItems {
		return nil, errors.New("names " + strconv.Itoa(len(items)) + " dimensions; at most " + strconv.Itoa(MaxSensitivityItems))
	}
	var weights []Weight
	for _, item := range items {
		name, raw, hasWeight := strings.Cut(item, "=")
		name = pyStrip(name)
		if !dimensionName(name) {
			return nil, errors.New(pyRepr(pyHead(name, 40)) + " is not a dimension name (e.g. cpu, memory, io, cache)")
		}
		weight := 1.0
		if hasWeight {
			v, ok := ParseFloat(raw)
			if !ok {
				return nil, errors.New("weight of " + name + " is not a number: " + pyRepr(pyHead(raw, 20)))
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				return nil, errors.New("weight of " + name + " must be a positive number, got " + pyRepr(pyHead(raw, 20)))
			}
			weight = v
		}
		weights = setWeight(weights, name, weight)
	}
	top := 0.0
	for i, w := range weights {
		if i == 0 || w.Weight > top {
			top = w.Weight
		}
	}
	for i := range weights {
		weights[i].Weight /= top
	}
	return &Sensitivity{Weights: weights}, nil
}

// setWeight: a name given twice keeps its first place and its last weight (a Python dict).
func setWeight(weights []Weight, name string, weight float64) []Weight {
	for i := range weights {
		if weights[i].Name == name {
			weights[i].Weight = weight
			return weights
		}
	}
	return append(weights, Weight{name, weight})
}

// dimensionName: [a-z][a-zA-Z0-9]{0,31}.
func dimensionName(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
