package locks

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults applied by Resolve when an option is not given.
const (
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL accepted: below it the drift allowance
	// (see Drift) leaves too little validity to do anything.
	MinTTL = 10 * time.Millisecond
	// MaxNameLen is the longest lock name accepted, in bytes.
	MaxNameLen = 256
)

// Options are the settings shared by every lock. Build them with Resolve from
// Option values; backends read the fields.
type Options struct {
	// TTL is how long a lease lives unless renewed. Default DefaultTTL.
	TTL time.Duration
	// Watchdog renews a held lease every TTL/3 and closes Done as soon as it
	// is lost or can no longer be renewed in time. Default on.
	Watchdog bool
	// WaitBudget bounds how long Lock waits in total; zero means only ctx
	// bounds it. Default zero.
	WaitBudget time.Duration
	// RequestTimeout bounds one request to one backend node. Default TTL/10;
	// multi-node locks (Redlock) rely on it being far below the TTL.
	RequestTimeout time.Duration
	// Prefix namespaces the backend keys of the lock. Default is the
	// backend's own (documented by each backend).
	Prefix string
	// Clock is the source of time. Default SystemClock.
	Clock Clock
	// Logger receives the lock's diagnostics. Default: discarded.
	Logger *slog.Logger
	// Observer is called at each Point. Default nil (no cost).
	Observer Observer
	// MaxHold is the longest a lease lives from its grant, renewed or not;
	// zero means no bound. Default zero. See WithMaxHold.
	MaxHold time.Duration
	// Owner is the identity that may acquire the lock again while it holds
	// it; "" means none (every acquisition is a new owner). Default "". See
	// WithOwner.
	Owner string

	requestTimeoutSet bool
	ownerSet          bool
	rand              *lockedRand // nil: the process-wide source
}

// lockedRand is a rand.Rand safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// Jitter returns a random duration in [0, n), or 0 when n ≤ 0: the random
// part of a waiter's pause before it tries again. It draws from the source
// given by WithRand, else from math/rand/v2's process-wide source. Locks
// draw every random delay here, so that a seeded source fixes them.
func (o Options) Jitter(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	if o.rand == nil {
		return rand.N(n)
	}
	o.rand.mu.Lock()
	defer o.rand.mu.Unlock()
	return time.Duration(o.rand.r.Int64N(int64(n)))
}

// Option sets one field of Options.
type Option func(*Options)

// WithTTL sets the lease TTL (default 10s; at least MinTTL).
func WithTTL(d time.Duration) Option { return func(o *Options) { o.TTL = d } }

// WithWatchdog turns the renewing watchdog on or off (default on). Without
// it a lease lives exactly one TTL from its last renewal, and Done still
// closes when that time passes.
func WithWatchdog(on bool) Option { return func(o *Options) { o.Watchdog = on } }

// WithWaitBudget bounds the total time Lock may wait (default: no bound
// beyond ctx). It must not be negative.
func WithWaitBudget(d time.Duration) Option { return func(o *Options) { o.WaitBudget = d } }

// WithRequestTimeout bounds each backend request (default TTL/10). It must
// be positive and shorter than the TTL.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *Options) { o.RequestTimeout, o.requestTimeoutSet = d, true }
}

// WithPrefix sets the namespace of the lock's backend keys (default: the
// backend's own).
func WithPrefix(p string) Option { return func(o *Options) { o.Prefix = p } }

// WithClock sets the clock (default SystemClock). A nil clock is rejected.
func WithClock(c Clock) Option { return func(o *Options) { o.Clock = c } }

// Backoff is the pause before retry number tries (counted from 1) of a
// request that failed in a way the same request may not meet again: 10 ms
// doubling up to 500 ms, plus up to half again of Jitter.
func (o Options) Backoff(tries int) time.Duration {
	d := min(5*time.Millisecond<<min(tries, 7), 500*time.Millisecond)
	return d + o.Jitter(d/2+1)
}

// WithRand makes the lock draw its random delays (the jitter of a waiter's
// retries, see Options.Jitter) from src, used under a lock of its own,
// instead of math/rand/v2's process-wide source. With a seeded src the
// delays are the same from run to run: a deterministic test (propertytest
// gives each client a source seeded by the run) replays them. nil means the
// process-wide source.
func WithRand(src rand.Source) Option {
	return func(o *Options) {
		o.rand = nil
		if src != nil {
			o.rand = &lockedRand{r: rand.New(src)}
		}
	}
}

// WithLogger sets the logger (default: discard). nil means discard.
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// WithObserver adds obs to the observers called at each Point (default
// none): given several times, every observer is called, in the order the
// options were given, so that a test harness can watch a lock that already
// has an observer of its own. A nil obs adds nothing.
func WithObserver(obs Observer) Option {
	return func(o *Options) { o.Observer = chainObservers(o.Observer, obs) }
}

// Resolve applies opts over the defaults, with defaultPrefix as the
// backend's own prefix, and validates the result.
func Resolve(defaultPrefix string, opts ...Option) (Options, error) {
	o := Options{
		TTL:      DefaultTTL,
		Watchdog: true,
		Prefix:   defaultPrefix,
		Clock:    SystemClock{},
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.TTL < MinTTL {
		return o, fmt.Errorf("%w: %v (must be at least %v)", ErrInvalidTTL, o.TTL, MinTTL)
	}
	if o.WaitBudget < 0 {
		return o, fmt.Errorf("%w: wait budget %v is negative", ErrInvalidOption, o.WaitBudget)
	}
	if !o.requestTimeoutSet {
		o.RequestTimeout = o.TTL / 10
	}
	if o.RequestTimeout <= 0 || o.RequestTimeout >= o.TTL {
		return o, fmt.Errorf("%w: request timeout %v must be positive and below the TTL %v",
			ErrInvalidOption, o.RequestTimeout, o.TTL)
	}
	if o.MaxHold < 0 || (o.MaxHold > 0 && o.MaxHold < o.RequestTimeout) {
		return o, fmt.Errorf("%w: max hold %v must be zero (none) or at least the request timeout %v",
			ErrInvalidOption, o.MaxHold, o.RequestTimeout)
	}
	if o.ownerSet {
		if err := validateID(ErrInvalidOption, "owner id ", o.Owner); err != nil {
			return o, err
		}
	}
	if o.Clock == nil {
		return o, fmt.Errorf("%w: nil clock", ErrInvalidOption)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// ValidateName reports whether name can name a lock: non-empty, valid UTF-8,
// at most MaxNameLen bytes, with no control characters.
func ValidateName(name string) error { return validateID(ErrInvalidName, "", name) }

// validateID applies ValidateName's rules to id, what says what id is
// ("" for a lock name, else with a trailing space), and wraps sentinel.
func validateID(sentinel error, what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: %sempty", sentinel, what)
	case len(id) > MaxNameLen:
		return fmt.Errorf("%w: %s%d bytes (at most %d)", sentinel, what, len(id), MaxNameLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %s%q is not valid UTF-8", sentinel, what, id)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s%q contains a control character", sentinel, what, id)
		}
	}
	return nil
}

// Drift is the allowance for clock drift between client and backend over one
// TTL: 1% of the TTL plus 2 ms, as in the Redlock algorithm. A lease is
// considered valid until (request sent) + ttl - Drift(ttl).
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
