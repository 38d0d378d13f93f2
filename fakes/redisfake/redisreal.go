package redisfake

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// realTimeout bounds each housekeeping call the fake makes to a real server.
const realTimeout = 10 * time.Second

// keyBatch is how many keys one SCAN page asks for and one script or UNLINK
// handles.
const keyBatch = 256

// pingReal returns an error unless the real server answers PING.
func (r *Server) pingReal() error {
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the Redis server at %s does not answer PING: %w", r.addr, err)
	}
	return nil
}

// prefixKeys returns every key under the prefix, each once (SCAN may return
// a key more than once).
func (r *Server) prefixKeys(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var keys []string
	var cursor uint64
	for {
		page, next, err := r.client.Scan(ctx, cursor, r.prefix+"*", keyBatch).Result()
		if err != nil {
			return nil, fmt.Errorf("SCAN: %w", err)
		}
		for _, k := range page {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if next == 0 {
			return keys, nil
		}
		cursor = next
	}
}

// inBatches calls f with consecutive slices of at most keyBatch keys.
func inBatches(keys []string, f func([]string) error) error {
	for len(keys) > 0 {
		n := min(len(keys), keyBatch)
		if err := f(keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// deletePrefix removes every key under the prefix.
func (r *Server) deletePrefix() error {
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	keys, err := r.prefixKeys(ctx)
	if err != nil {
		return err
	}
	return inBatches(keys, func(batch []string) error {
		if err := r.client.Unlink(ctx, batch...).Err(); err != nil {
			// UNLINK needs Redis 4; DEL does the same, synchronously.
			return r.client.Del(ctx, batch...).Err()
		}
		return nil
	})
}

// advanceScript shortens the TTL of each key in KEYS by ARGV[1] milliseconds,
// deleting the keys it would run out. Keys without a TTL are left alone. It
// runs as one script so that no command interleaves between PTTL and the
// change.
var advanceScript = redis.NewScript(`
local d = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  local left = redis.call('PTTL', key)
  if left > 0 then
    if left <= d then
      redis.call('DEL', key)
    else
      redis.call('PEXPIRE', key, left - d)
    end
  end
end
return 0
`)

// advanceReal emulates d passing on a real server for the keys under the
// prefix.
func (r *Server) advanceReal(d time.Duration) error {
	ms := d.Milliseconds()
	if ms == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	keys, err := r.prefixKeys(ctx)
	if err != nil {
		return err
	}
	return inBatches(keys, func(batch []string) error {
		return advanceScript.Run(ctx, r.client, batch, ms).Err()
	})
}

// realCommandCount reads total_commands_processed from INFO stats.
func (r *Server) realCommandCount() int {
	r.owner.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	info, err := r.client.Info(ctx, "stats").Result()
	if err != nil {
		r.owner.Fatalf("redisfake: CommandCount: INFO stats on %s: %v", r.addr, err)
	}
	n, err := infoField(info, "total_commands_processed")
	if err != nil {
		r.owner.Fatalf("redisfake: CommandCount: INFO stats on %s: %v", r.addr, err)
	}
	return n
}

// infoField returns the integer field name of an INFO reply.
func infoField(info, name string) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if ok && k == name {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("no field %q in the reply", name)
}
