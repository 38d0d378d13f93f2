package locks

// HeldContext is RequestContext under a Gate with the clock given: the
// tests drive it with a fakes.Clock.
var HeldContext = heldContext
