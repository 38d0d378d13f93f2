package linearize_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lockproof/lockproof/linearize"
)

// Two clients are granted the same lease lock 40ms apart although its TTL
// is 100ms: a double grant. The same history with the second grant after
// the TTL is fine.
func Example() {
	model, err := linearize.NewLeaseModel(100*time.Millisecond, time.Millisecond)
	if err != nil {
		panic(err)
	}
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	acquire := func(id, client int, owner uint64, call int64, token uint64) linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput] {
		return linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]{
			ID: id, ClientID: client, Call: ms(call), Return: ms(call + 2),
			Input:  linearize.LeaseInput{Lock: "orders", Op: linearize.Acquire, Owner: owner},
			Output: linearize.LeaseOutput{OK: true, Token: token},
		}
	}
	history := []linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]{
		acquire(1, 1, 0xa1, 0, 1),
		acquire(2, 2, 0xb2, 40, 2),
	}
	res, err := linearize.Check(context.Background(), model, history, linearize.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Verdict, "counterexample:", res.Counterexample, "minimal:", res.Minimal)
	_ = linearize.WriteText(os.Stdout, model, history, &res, linearize.Picture{Width: 20})

	history[1] = acquire(2, 2, 0xb2, 120, 2)
	res, _ = linearize.Check(context.Background(), model, history, linearize.Options{})
	fmt.Println(res.Verdict, "linearization:", res.Linearization())
	// Output:
	// Illegal counterexample: [0 1] minimal: true
	// Illegal — not linearizable: partition "orders", counterexample of 2 operations (minimal)
	// time 0 .. 42000000; * counterexample, ! where the search got stuck
	// * c1   |[]                  | id 1 [0, 2000000]: acquire(orders, owner 161) -> granted, token 1
	// ! c2   |                  []| id 2 [40000000, 42000000]: acquire(orders, owner 178) -> granted, token 2
	// Ok linearization: [[0 1]]
}
