package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Write is one row a unit of work writes: its table, key and new value, or
// Deleted. It is what a write set lists.
type Write struct {
	Table   string          `json:"table"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value,omitempty"`
	Deleted bool            `json:"deleted,omitempty"`
}

// Work is a unit of work: the business writes of one call, held in memory
// over the committed rows. Reads see the work's own writes. Nothing is
// written until Apply, so a preview is a Work that is never applied, and a
// tool that runs for a while holds no database lock.
type Work struct {
	store   *Store
	account string
	parent  *Work

	mu     sync.Mutex
	writes map[rowKey]Write
	order  []rowKey
	// seen holds the version of each row as first observed from the
	// database (0: absent), which Apply checks so that a row changed by
	// someone else in between is a conflict, not a lost update.
	seen map[rowKey]int64
}

type rowKey struct{ table, key string }

// NewWork starts a unit of work in an account.
func (s *Store) NewWork(account string) *Work {
	return &Work{store: s, account: account, writes: map[rowKey]Write{}, seen: map[rowKey]int64{}}
}

// Account is the account the work writes in.
func (w *Work) Account() string { return w.account }

// Nested starts a unit of work inside this one: it sees this work's writes,
// and its own become this work's only when merged. A failed call's nested
// work is dropped, so its writes roll back.
func (w *Work) Nested() *Work {
	return &Work{store: w.store, account: w.account, parent: w, writes: map[rowKey]Write{}, seen: map[rowKey]int64{}}
}

// Merge makes a nested work's writes part of this one.
func (w *Work) Merge(child *Work) {
	child.mu.Lock()
	defer child.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range child.order {
		w.put(k, child.writes[k])
	}
	for k, v := range child.seen {
		if _, ok := w.seen[k]; !ok {
			w.seen[k] = v
		}
	}
}

func (w *Work) put(k rowKey, write Write) {
	if _, ok := w.writes[k]; !ok {
		w.order = append(w.order, k)
	}
	w.writes[k] = write
}

// lookup finds a pending write in this work or the works around it.
func (w *Work) lookup(k rowKey) (Write, bool) {
	for cur := w; cur != nil; cur = cur.parent {
		cur.mu.Lock()
		write, ok := cur.writes[k]
		cur.mu.Unlock()
		if ok {
			return write, true
		}
	}
	return Write{}, false
}

func (w *Work) root() *Work {
	cur := w
	for cur.parent != nil {
		cur = cur.parent
	}
	return cur
}

// observe remembers the committed version of a row the first time the work
// meets it.
func (w *Work) observe(k rowKey, version int64) {
	r := w.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[k]; !ok {
		r.seen[k] = version
	}
	if w != r {
		w.mu.Lock()
		if _, ok := w.seen[k]; !ok {
			w.seen[k] = version
		}
		w.mu.Unlock()
	}
}

// Get reads a row as this work sees it.
func (w *Work) Get(ctx context.Context, table, key string) (json.RawMessage, bool, error) {
	k := rowKey{table, key}
	if write, ok := w.lookup(k); ok {
		if write.Deleted {
			return nil, false, nil
		}
		return write.Value, true, nil
	}
	var row Row
	var found bool
	err := w.store.Read(ctx, func(tx *Tx) error {
		var err error
		row, found, err = tx.Row(ctx, w.account, table, key)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !found {
		w.observe(k, 0)
		return nil, false, nil
	}
	w.observe(k, row.Version)
	return row.Value, true, nil
}

// Scan lists rows of a table with a key prefix as this work sees them, in key
// order, after `after`, at most limit (0: all).
func (w *Work) Scan(ctx context.Context, table, prefix, after string, limit int) ([]Row, error) {
	pending := w.pendingWithPrefix(table, prefix)
	baseLimit := 0
	if limit > 0 {
		baseLimit = limit + len(pending)
	}
	var base []Row
	err := w.store.Read(ctx, func(tx *Tx) error {
		var err error
		base, err = tx.Rows(ctx, w.account, table, prefix, after, baseLimit)
		return err
	})
	if err != nil {
		return nil, err
	}
	merged := map[string]Row{}
	for _, r := range base {
		merged[r.Key] = r
	}
	for key, write := range pending {
		if key <= after {
			continue
		}
		if write.Deleted {
			delete(merged, key)
			continue
		}
		merged[key] = Row{Table: table, Key: key, Value: write.Value}
	}
	out := make([]Row, 0, len(merged))
	for _, r := range merged {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (w *Work) pendingWithPrefix(table, prefix string) map[string]Write {
	out := map[string]Write{}
	var chain []*Work
	for cur := w; cur != nil; cur = cur.parent {
		chain = append(chain, cur)
	}
	// Outer works first, so inner writes win.
	for i := len(chain) - 1; i >= 0; i-- {
		cur := chain[i]
		cur.mu.Lock()
		for k, write := range cur.writes {
			if k.table == table && strings.HasPrefix(k.key, prefix) {
				out[k.key] = write
			}
		}
		cur.mu.Unlock()
	}
	return out
}

// Put writes a row's new value.
func (w *Work) Put(ctx context.Context, table, key string, value json.RawMessage) error {
	if !json.Valid(value) {
		return fmt.Errorf("store: the value for %s %q is not valid JSON", table, key)
	}
	if err := w.observeBase(ctx, rowKey{table, key}); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.put(rowKey{table, key}, Write{Table: table, Key: key, Value: value})
	return nil
}

// Delete removes a row.
func (w *Work) Delete(ctx context.Context, table, key string) error {
	if err := w.observeBase(ctx, rowKey{table, key}); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.put(rowKey{table, key}, Write{Table: table, Key: key, Deleted: true})
	return nil
}

// observeBase makes sure a written row's committed version is known, so that
// a blind write still cannot overwrite a concurrent one unseen.
func (w *Work) observeBase(ctx context.Context, k rowKey) error {
	r := w.root()
	r.mu.Lock()
	_, known := r.seen[k]
	r.mu.Unlock()
	if known {
		return nil
	}
	_, _, err := w.root().Get(ctx, k.table, k.key)
	return err
}

// Writes lists the work's writes in the order rows were first written, each
// with its final value.
func (w *Work) Writes() []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Write, 0, len(w.order))
	for _, k := range w.order {
		out = append(out, w.writes[k])
	}
	return out
}

// Apply writes a work's rows in this transaction, each only if nobody changed
// it since the work first saw it (ErrConflict otherwise).
func (tx *Tx) Apply(ctx context.Context, w *Work) error {
	r := w.root()
	bump := false
	for _, write := range w.Writes() {
		bump = bump || RegistryTables[write.Table]
		r.mu.Lock()
		expect := r.seen[rowKey{write.Table, write.Key}]
		r.mu.Unlock()
		var err error
		switch {
		case write.Deleted && expect == 0:
			continue // created and deleted by the work, or deleting nothing
		case write.Deleted:
			err = tx.DeleteRow(ctx, w.account, write.Table, write.Key, expect)
		default:
			_, err = tx.PutRow(ctx, w.account, write.Table, write.Key, write.Value, expect)
		}
		if err != nil {
			return err
		}
	}
	if bump {
		return tx.bumpGeneration(ctx, w.account)
	}
	return nil
}

// RegistryTables are the tables whose rows define what a request resolves
// (actions and principals). A write to one moves the account's generation,
// so that caches of resolved servers know to look again.
var RegistryTables = map[string]bool{"Action": true, "ActionName": true, "Principal": true}

func (tx *Tx) bumpGeneration(ctx context.Context, account string) error {
	_, err := tx.exec(ctx, `INSERT INTO generations (account, n) VALUES (?, 1)
		ON CONFLICT (account) DO UPDATE SET n = generations.n + 1`, account)
	if err != nil {
		return fmt.Errorf("store: move generation: %w", err)
	}
	tx.movedGeneration = true
	return nil
}

// Generation is a number that changes whenever a registry row of the account
// is written: equal generations mean equal actions and principals.
//
// Every request reads it. On SQLite this process is the database's only
// writer, so what it read stays true until one of its own transactions
// moves a generation: it is kept until then (see generations).
func (s *Store) Generation(ctx context.Context, account string) (int64, error) {
	if s.dialect != SQLite {
		return s.readGeneration(ctx, account)
	}
	n, ok, epoch := s.generations.known(account)
	if ok {
		return n, nil
	}
	n, err := s.readGeneration(ctx, account)
	if err == nil {
		s.generations.learn(account, n, epoch)
	}
	return n, err
}

func (s *Store) readGeneration(ctx context.Context, account string) (int64, error) {
	var n int64
	err := s.generationStatement.QueryRowContext(ctx, account).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read generation: %w", err)
	}
	return n, nil
}

// generations are the generations this process read, kept while none of
// its transactions moved one. A transaction that moved one forgets them all
// once it ended; a read that began before it ended is not kept, so that a
// generation it read before the commit cannot outlive the commit.
type generations struct {
	mu    sync.Mutex
	epoch uint64
	read  map[string]int64
}

func (g *generations) known(account string) (n int64, ok bool, epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok = g.read[account]
	return n, ok, g.epoch
}

// learn keeps a generation read since epoch, unless one moved meanwhile.
func (g *generations) learn(account string, n int64, epoch uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epoch != epoch {
		return
	}
	if g.read == nil {
		g.read = map[string]int64{}
	}
	g.read[account] = n
}

func (g *generations) forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.epoch++
	clear(g.read)
}
