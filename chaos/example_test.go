package chaos_test

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/chaos"
)

// A nemesis schedule is drawn from a seed and printed; the printed text
// parses back, so a failing run replays from its log.
func Example() {
	set := chaos.FaultSet{
		Kinds: []chaos.Kind{chaos.KindPartition, chaos.KindPause},
		Targets: map[chaos.Kind][]string{
			chaos.KindPartition: {"node0", "node1"},
			chaos.KindPause:     {"client-a"},
		},
		MaxDuration: time.Second,
	}
	s, err := chaos.Plan(42, set, 5*time.Second, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	replayed, err := chaos.ParseSchedule(s.String())
	fmt.Println(len(replayed), err)
	// Output:
	// +566ms partition node1 for 531ms
	// +2.302s pause client-a for 534ms
	// +3.006s partition node0 for 301ms
	// 3 <nil>
}
