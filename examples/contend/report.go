package main

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// print writes the report to w in one write.
func (r Report) print(w io.Writer) error {
	var b bytes.Buffer
	c := r.Config
	fmt.Fprintf(&b, "contend: %d workers in %d processes × %d rounds on one lock (TTL %v), %s\n\n",
		c.Workers, c.Procs, c.Rounds, c.TTL, r.Backend)
	l := r.Locked
	fmt.Fprintf(&b, "with the lock (redislock, fenced counter)\n")
	line(&b, "acquisitions", l.Acquisitions)
	line(&b, "elapsed", l.Elapsed.Round(time.Millisecond))
	line(&b, "acquisitions/s", fmt.Sprintf("%.0f", perSecond(l.Acquisitions, l.Elapsed)))
	line(&b, "counter", fmt.Sprintf("%d (expected %d)", l.Counter, l.Expected))
	line(&b, "fence rejections", l.Rejections)
	line(&b, "highest token", l.HighestToken)
	line(&b, "leases lost", l.LostLeases)
	u := r.Unlocked
	fmt.Fprintf(&b, "\nwithout a lock (plain read-modify-write)\n")
	line(&b, "elapsed", u.Elapsed.Round(time.Microsecond))
	line(&b, "counter", fmt.Sprintf("%d (expected %d)", u.Counter, u.Expected))
	lost := fmt.Sprint(u.Lost)
	if u.Lost == 0 {
		lost += " (none this time: the race depends on scheduling)"
	}
	line(&b, "lost updates", lost)
	fmt.Fprintf(&b, "\n%s\n", r.verdict())
	_, err := w.Write(b.Bytes())
	return err
}

func line(b *bytes.Buffer, name string, v any) {
	fmt.Fprintf(b, "  %-18s %v\n", name, v)
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// verdict is the report's last line.
func (r Report) verdict() string {
	l := r.Locked
	if r.OK() {
		return "PASS: under the lock no update was lost and the fence refused nothing"
	}
	return fmt.Sprintf("FAIL: under the lock %d of %d updates were lost and the fence refused %d accesses",
		l.Expected-l.Counter, l.Expected, l.Rejections)
}
