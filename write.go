package bloomkv

// The write calls: Set, Delete, DeleteRange, Apply, and Flush, which forces
// the memtable to a table.

import "slices"

// Set writes value under key.
func (d *DB) Set(key, value []byte, o *WriteOptions) error {
	b := d.getBatch()
	defer d.putBatch(b)
	if err := b.Set(key, value); err != nil {
		return err
	}
	return d.Apply(b, o)
}

// Delete removes key.
func (d *DB) Delete(key []byte, o *WriteOptions) error {
	b := d.getBatch()
	defer d.putBatch(b)
	if err := b.Delete(key); err != nil {
		return err
	}
	return d.Apply(b, o)
}

// DeleteRange removes every key in [start, end) written before it. start
// must not sort after end; an empty range does nothing.
func (d *DB) DeleteRange(start, end []byte, o *WriteOptions) error {
	b := d.getBatch()
	defer d.putBatch(b)
	if err := b.DeleteRange(start, end); err != nil {
		return err
	}
	return d.Apply(b, o)
}

// Apply writes every write of b atomically: after a crash all of them are in
// the store or none is. A nil o means NoSync. b may be reused once Apply
// returns, and must not be applied by two calls at once.
func (d *DB) Apply(b *Batch, o *WriteOptions) error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if b == nil || b.Empty() {
		return nil
	}
	w := &b.waiter
	*w = commitWaiter{batch: b, sync: o != nil && o.Sync}
	err := d.commit(w)
	*w = commitWaiter{}
	return err
}

// Flush writes the memtable to a table and waits for it.
func (d *DB) Flush() error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	w := &commitWaiter{flush: true}
	if err := d.commit(w); err != nil {
		return err
	}
	if w.flushed == nil {
		return nil // nothing to flush
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for slices.Contains(d.mu.imm, w.flushed) && d.mu.bgErr == nil && !d.mu.closed {
		d.mu.cond.Wait()
	}
	if d.mu.bgErr != nil {
		return d.mu.bgErr
	}
	if d.mu.closed {
		return ErrClosed
	}
	return nil
}
