package main

import (
	"strings"
	"testing"

	"github.com/lockproof/lockproof/chaos"
)

// Every fault kind is explained in the legend, once, with a note of its
// own: a kind added to chaos without one fails here.
func TestLegendNamesEveryFaultKind(t *testing.T) {
	if len(faultKinds) != len(chaos.Kinds()) {
		t.Errorf("%d notes for %d kinds", len(faultKinds), len(chaos.Kinds()))
	}
	for _, k := range chaos.Kinds() {
		note := faultKinds[k]
		if note == "" {
			t.Errorf("fault kind %s has no note in the legend", k)
			continue
		}
		if n := strings.Count(legend, string(k)+": "+note); n != 1 {
			t.Errorf("the legend names %s with its note %d times, want once:\n%s", k, n, legend)
		}
	}
}
