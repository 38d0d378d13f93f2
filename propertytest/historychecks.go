package propertytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/linearize"
)

// The end-of-run checks: plain functions of the run's histories and a
// historyInput, each returning what it found. The caller (verdict) keeps
// the books: the spurious refusals, the run's violations.

// leaseChecker checks a lock history.
type leaseChecker = linearize.Checker[linearize.LeaseInput, linearize.LeaseOutput]

// historyInput is what the history checks read besides the histories.
type historyInput struct {
	model     linearize.Spec    // the lock history's model (lockModel)
	lock      leaseChecker      // model's checker
	opts      linearize.Options // the bounds of a check (Options.checkOptions)
	unclaimed []string          // the unclaimed faults injected, sorted
}

// lockFinding is what checkLockHistory found in the lock history.
type lockFinding struct {
	result linearize.Result // the verdict on the history judged
	// evidence is that history with result, every operation drawn: what
	// the named checks' findings carry.
	evidence *Evidence
	refusals []lockOp   // refusals of a free lock the history was judged without, in order
	illegal  *Violation // the violation of a history that is not linearizable, else nil
}

// checkLockHistory checks the lock history h against in.model. A refusal
// of a free lock is tolerated up to maxSpurious times: the history is
// judged without it, and the refusal returned.
func checkLockHistory(ctx context.Context, in historyInput, h []lockOp) (lockFinding, error) {
	var f lockFinding
	res, err := in.lock.Check(ctx, h, in.opts)
	if err != nil {
		return f, fmt.Errorf("propertytest: checking the lock history: %w", err)
	}
	for spurious := 0; res.Verdict == linearize.Illegal && refusal(h, res.Blocker) && spurious < maxSpurious; spurious++ {
		f.refusals = append(f.refusals, h[res.Blocker])
		h = without(h, res.Blocker)
		if res, err = in.lock.Check(ctx, h, in.opts); err != nil {
			return f, fmt.Errorf("propertytest: checking the lock history: %w", err)
		}
	}
	f.result = res
	f.evidence = &Evidence{Model: in.model, Lease: h, Result: res, All: true}
	if res.Verdict == linearize.Illegal {
		v := lockIllegal(ctx, in, h, &res)
		e := *f.evidence
		e.All, e.Expected = false, v.Expected
		v.Evidence = &e
		f.illegal = &v
	}
	return f, nil
}

// maxSpurious is how many refusals of a free lock one run tolerates.
const maxSpurious = 2

// refusal reports whether h[i] is an acquire refused, of known outcome.
func refusal(h []lockOp, i int) bool {
	return i >= 0 && i < len(h) && h[i].Input.Op == linearize.Acquire && !h[i].Output.OK && !h[i].Unknown
}

// without returns h without its operation i, the others numbered anew.
func without(h []lockOp, i int) []lockOp {
	out := make([]lockOp, 0, len(h)-1)
	for j, op := range h {
		if j != i {
			op.ID = len(out)
			out = append(out, op)
		}
	}
	return out
}

// modelName names the model the lock history is checked against, and how
// it reckons a lease, for a violation's detail.
func modelName(model linearize.Spec) string {
	return model.String() + "; a grant holds until the deadline its holder was given, at most TTL less tolerance after its call, and a renewal for that long after its call"
}

// lockIllegal names the property a non-linearizable lock history breaks,
// from the operation the search got stuck at.
func lockIllegal(ctx context.Context, in historyInput, h []lockOp, res *linearize.Result) Violation {
	model := in.lock
	p, what := Exclusivity, "a grant while the lease of another owner could not yet have expired, or a fencing token that did not grow"
	if b := res.Blocker; b >= 0 && b < len(h) {
		op := h[b]
		switch {
		case op.Input.Op != linearize.Acquire && op.Output.OK && !op.Unknown:
			p, what = Symmetry, "an Unlock or Renew succeeded for an owner that did not hold the lock"
		case op.Input.Op != linearize.Acquire && !op.Unknown:
			what = "the holder's lease was lost before it could have expired"
		case op.Input.Op == linearize.Acquire && !op.Output.OK && !op.Unknown:
			p, what = Progress, fmt.Sprintf("acquires were refused while the lock was free, more than %d times", maxSpurious)
		case op.Input.Op == linearize.Acquire && !op.Unknown && grantWasLegal(ctx, model, h, res.Counterexample, b, in.opts):
			p, what = Symmetry, "an Unlock or Renew succeeded, at or after a legal grant to another owner, for an owner that no longer held the lock"
		}
		what += fmt.Sprintf(" (stuck at: client %d %s)", op.ClientID, model.DescribeOperation(&op))
	}
	var cex []lockOp
	for _, i := range res.Counterexample {
		cex = append(cex, h[i])
	}
	if in.model.Kind == linearize.KindLease {
		if reasons := linearize.ExplainLease(cex, in.model.TTL, in.model.Tolerance); len(reasons) > 0 {
			what += ": " + strings.Join(reasons, "; ")
		}
	}
	minimal := "minimal"
	if !res.Minimal {
		minimal = "not minimized"
	}
	return Violation{
		Property: p, Expected: len(in.unclaimed) > 0, Unclaimed: slices.Clone(in.unclaimed),
		Detail:  fmt.Sprintf("lock history is not linearizable (%s): %s; counterexample of %d operations (%s)", modelName(in.model), what, len(res.Counterexample), minimal),
		History: lockText(in.lock, h, res),
	}
}

// grantWasLegal reports whether the counterexample cex, stuck at the grant
// h[grant], becomes linearizable without the successful Unlocks and Renews
// of other owners that were called at or after the instant the grant
// returned. The search may get stuck at a grant after linearizing such
// calls first (when several share an instant, as on a manual clock, it
// linearizes as many as it can): the grant itself was legal, and what
// broke the lock is that a former holder was still told it held the lock,
// which is symmetry's business. A renewal called before the grant returned
// stays: when the holder renewed honestly while another client's Lock was
// still waiting, and the Lock then returned granted, the double grant is
// exclusivity's, not a renewal's fault. A grant that stays illegal without
// the dropped calls is exclusivity's.
func grantWasLegal(ctx context.Context, model leaseChecker,
	h []lockOp, cex []int, grant int, opts linearize.Options) bool {
	g := h[grant]
	return legalWithout(ctx, model, h, cex, opts, func(op *lockOp) bool {
		return op.Input.Op != linearize.Acquire && op.Output.OK && !op.Unknown &&
			op.Input.Owner != g.Input.Owner && op.Call >= g.Return
	})
}

// legalWithout reports whether the counterexample cex becomes
// linearizable once the operations drop picks are left out.
func legalWithout(ctx context.Context, model leaseChecker,
	h []lockOp, cex []int, opts linearize.Options, drop func(op *lockOp) bool) bool {
	var rest []lockOp
	for _, i := range cex {
		if !drop(&h[i]) {
			rest = append(rest, h[i])
		}
	}
	if len(rest) == len(cex) {
		return false
	}
	res, err := model.Check(ctx, rest, opts)
	return err == nil && res.Verdict == linearize.Ok
}

// checkAgainst checks h against the model s names.
func checkAgainst[I, O any](ctx context.Context, s linearize.Spec, h []linearize.Operation[I, O], opts linearize.Options) (linearize.Result, error) {
	c, err := linearize.Bind[I, O](s)
	if err != nil {
		return linearize.Result{}, err
	}
	return c.Check(ctx, h, opts)
}

// checkRegister checks the register history: fenced (every lease had a
// token) against NewFencedRegisterModel, unfenced against NewRegisterModel.
// It returns the violation of a history that is not linearizable, or
// reports the check undecided. It guards the recording itself; lost
// updates are checkLostUpdates' job.
func checkRegister(ctx context.Context, in historyInput, h []regOp, unfenced int) (v *Violation, undecided bool, err error) {
	var res linearize.Result
	ev := &Evidence{Expected: len(in.unclaimed) > 0}
	switch unfenced {
	case 0:
		ev.Model, ev.Fenced = linearize.Spec{Kind: linearize.KindFenced}, fencedEvidence(h)
		res, err = checkAgainst(ctx, ev.Model, ev.Fenced, in.opts)
	case len(h):
		ev.Model, ev.Register = linearize.Spec{Kind: linearize.KindRegister}, plainEvidence(h)
		res, err = checkAgainst(ctx, ev.Model, ev.Register, in.opts)
	default:
		return nil, false, fmt.Errorf("propertytest: the lock gave %d of %d leases no fencing token: a lock must be fenced always or never", unfenced, len(h))
	}
	if err != nil {
		return nil, false, fmt.Errorf("propertytest: checking the register history: %w", err)
	}
	switch res.Verdict {
	case linearize.Unknown:
		return nil, true, nil
	case linearize.Ok:
		return nil, false, nil
	}
	ev.Result = res
	return &Violation{
		Property: Exclusivity, Expected: len(in.unclaimed) > 0, Unclaimed: slices.Clone(in.unclaimed),
		Detail:   fmt.Sprintf("the shared register's history is not linearizable (%d operations in the counterexample)", len(res.Counterexample)),
		Evidence: ev,
	}, false, nil
}

// checkLostUpdates describes the register's lost updates (two holders'
// read-modify-writes interleaved), "" when there are none. A lost update
// caused by a write after the writer's lease deadline is pausedPast: an
// expected violation unless the lock claims FaultPause (pauseClaimed).
func checkLostUpdates(lost []lostUpdate, pauseClaimed bool) (detail string, pausedPast bool) {
	if len(lost) == 0 {
		return "", false
	}
	paused := false
	lines := make([]string, len(lost))
	for i, l := range lost {
		paused = paused || l.late
		lines[i] = l.String()
	}
	return "lost update on the shared register: " + strings.Join(lines, "; "), paused && !pauseClaimed
}

// lockText is the lock history h and the result res on it (nil: none
// yet) as linearize.WriteText draws it with lock's model: of an Illegal
// result, the counterexample.
func lockText(lock leaseChecker, h []lockOp, res *linearize.Result) string {
	var b strings.Builder
	if err := lock.WriteText(&b, h, res, linearize.Picture{Unit: time.Nanosecond}); err != nil {
		return fmt.Sprintf("(the history could not be drawn: %v)", err)
	}
	return b.String()
}

// describeLockOps renders the last n operations of the lock history, for
// the named checks' findings, which come before any verdict.
func describeLockOps(lock leaseChecker, h []lockOp, n int) string {
	from := max(0, len(h)-n)
	text := lockText(lock, h[from:], nil)
	if from > 0 {
		text = fmt.Sprintf("... %d earlier operations\n", from) + text
	}
	return text
}
