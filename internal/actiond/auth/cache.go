package auth

import (
	"sync"
	"time"
)

// verified is a successful verification, minus the audience check, which
// depends on the endpoint and so runs on every use.
type verified struct {
	identity  Identity
	audiences []string
	issuer    *issuer
	until     time.Time // drop the entry from this instant on
}

// verifiedCache remembers verifications by the sha256 of the raw token. It is
// bounded: when full, the oldest insertion goes first. Expired entries are
// dropped when met.
type verifiedCache struct {
	mu      sync.RWMutex // reads share it: hits are the hot path
	entries map[[32]byte]cacheSlot
	order   []ringEntry // insertion order; a ring once full
	next    int         // ring position of the next insertion
	serial  uint64
}

type cacheSlot struct {
	value  *verified
	serial uint64
}

// ringEntry records an insertion. A key dropped on expiry and inserted again
// appears twice in the ring; the serial lets the older record's eviction
// leave the newer entry alone.
type ringEntry struct {
	key    [32]byte
	serial uint64
}

// newVerifiedCache returns nil (no caching) for size ≤ 0.
func newVerifiedCache(size int) *verifiedCache {
	if size <= 0 {
		return nil
	}
	return &verifiedCache{entries: make(map[[32]byte]cacheSlot, size), order: make([]ringEntry, 0, size)}
}

func (c *verifiedCache) get(key [32]byte, now time.Time) (*verified, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.RLock()
	slot, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	if !now.Before(slot.value.until) {
		c.drop(key, slot.serial)
		return nil, false
	}
	return slot.value, true
}

// drop removes an expired entry unless it was replaced meanwhile.
func (c *verifiedCache) drop(key [32]byte, serial uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot, ok := c.entries[key]; ok && slot.serial == serial {
		delete(c.entries, key)
	}
}

func (c *verifiedCache) put(key [32]byte, v *verified) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot, ok := c.entries[key]; ok {
		slot.value = v
		c.entries[key] = slot
		return
	}
	c.serial++
	record := ringEntry{key: key, serial: c.serial}
	if len(c.order) < cap(c.order) {
		c.order = append(c.order, record)
	} else {
		oldest := c.order[c.next]
		if slot, ok := c.entries[oldest.key]; ok && slot.serial == oldest.serial {
			delete(c.entries, oldest.key)
		}
		c.order[c.next] = record
	}
	c.next = (c.next + 1) % cap(c.order)
	c.entries[key] = cacheSlot{value: v, serial: c.serial}
}

func (c *verifiedCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
