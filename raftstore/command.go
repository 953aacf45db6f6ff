package raftstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv"
)

// commandVersion is the first byte of every encoded command.
const commandVersion = 1

// MaxCommandSize is the largest encoded Batch (Batch.Size) a Node
// proposes; Apply refuses a larger one with an error wrapping
// bloomkv.ErrTooLarge before it reaches raft. Its log entry fits one
// bloomkv value, and followers store and acknowledge it well within raft's
// leader lease; etcd's default limit on a request is 1.5 MiB, Consul's on a
// value 512 KiB.
const MaxCommandSize = 8 << 20

// maxAppliedCommand is the largest command the FSM applies: a command
// from a log store other than LogStore may be larger than MaxCommandSize,
// and one past this bound, whose batch could pass bloomkv.MaxBatchSize,
// is refused for its entry (on every replica alike) instead of applied.
const maxAppliedCommand = 256 << 20

// The FSM's batch, up to applyBatchBytes before a command is added and at
// most twice the command's length after (each operation's keys gain a
// prefix), fits bloomkv.MaxBatchSize.
const _ = uint(bloomkv.MaxBatchSize - applyBatchBytes - 2*maxAppliedCommand - 1<<20)

// Operations of a command. Sets, deletions and range deletions apply to the
// user's keys; opSetMeta and opMark are the node's own.
const (
	opSet         = 1
	opDelete      = 2
	opDeleteRange = 3
	// opSetMeta sets a key of the replicated metadata (the nodes' HTTP
	// addresses).
	opSetMeta = 4
	// opMark names a point in the log, a token, at which replicas that
	// asked for it take a snapshot to compare.
	opMark = 5
)

// Key spaces of an FSM's DB: the user's keys under prefixUser, the
// replicated metadata and the applied index under prefixMeta.
const (
	prefixUser = 'u'
	prefixMeta = 'm'
)

// appliedKey holds the index of the last log entry the FSM applied.
var appliedKey = []byte{prefixMeta, 0, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}

// metaKey is the stored key of the metadata key k; it sorts after
// appliedKey's space, and its first byte after prefixMeta is not 0.
func metaKey(k []byte) []byte { return append([]byte{prefixMeta, 1}, k...) }

func userKey(k []byte) []byte { return append([]byte{prefixUser}, k...) }

// userEnd is the stored key just past every user key.
var userEnd = []byte{prefixUser + 1}

// Batch is a command for Node.Apply: sets, deletions and range deletions
// of keys, applied atomically by every replica. The zero value is an empty
// batch.
type Batch struct {
	repr []byte
	n    int
}

func (b *Batch) init() {
	if len(b.repr) == 0 {
		b.repr = append(b.repr, commandVersion)
	}
}

func (b *Batch) add(op byte, fields ...[]byte) {
	b.init()
	b.repr = append(b.repr, op)
	for _, f := range fields {
		b.repr = binary.AppendUvarint(b.repr, uint64(len(f)))
		b.repr = append(b.repr, f...)
	}
	b.n++
}

// Set sets key to value.
func (b *Batch) Set(key, value []byte) { b.add(opSet, key, value) }

// Delete deletes key.
func (b *Batch) Delete(key []byte) { b.add(opDelete, key) }

// DeleteRange deletes the keys in [start, end); a nil or empty end leaves
// the range open above.
func (b *Batch) DeleteRange(start, end []byte) { b.add(opDeleteRange, start, end) }

func (b *Batch) setMeta(key, value []byte) { b.add(opSetMeta, key, value) }

func (b *Batch) mark(token []byte) { b.add(opMark, token) }

// Len returns the number of operations in the batch.
func (b *Batch) Len() int { return b.n }

// Size returns the length of the batch's encoding, which MaxCommandSize
// bounds.
func (b *Batch) Size() int {
	b.init()
	return len(b.repr)
}

// checkCommandSize refuses a command a node must not propose.
func checkCommandSize(cmd []byte) error {
	if len(cmd) > MaxCommandSize {
		return fmt.Errorf("raftstore: apply: batch of %d bytes exceeds MaxCommandSize (%d): %w", len(cmd), MaxCommandSize, bloomkv.ErrTooLarge)
	}
	return nil
}

// Bytes returns the batch's encoding, the command raft replicates.
func (b *Batch) Bytes() []byte {
	b.init()
	return b.repr
}

// DecodeBatch returns the batch encoded in cmd (Batch.Bytes), checking it
// as the FSM does; an error wraps ErrCorruption.
func DecodeBatch(cmd []byte) (*Batch, error) {
	ops, err := decodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	return &Batch{repr: append([]byte(nil), cmd...), n: len(ops)}, nil
}

// op is one decoded operation; its slices alias the command.
type op struct {
	kind     byte
	key, val []byte
}

// decodeCommand decodes and checks every operation of cmd: it either
// returns them all, each within bloomkv's limits once stored, or an error
// wrapping ErrCorruption (or bloomkv.ErrTooLarge).
func decodeCommand(cmd []byte) ([]op, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("empty command: %w", ErrCorruption)
	}
	if cmd[0] != commandVersion {
		return nil, fmt.Errorf("command version %d, want %d: %w", cmd[0], commandVersion, ErrCorruption)
	}
	if len(cmd) > maxAppliedCommand {
		return nil, fmt.Errorf("command of %d bytes, over the %d the FSM applies: %w", len(cmd), maxAppliedCommand, bloomkv.ErrTooLarge)
	}
	rest := cmd[1:]
	field := func(what string) ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, fmt.Errorf("truncated or malformed %s: %w", what, ErrCorruption)
		}
		f := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return f, nil
	}
	var ops []op
	for len(rest) > 0 {
		o := op{kind: rest[0]}
		rest = rest[1:]
		var err error
		switch o.kind {
		case opSet, opSetMeta, opDeleteRange:
			if o.key, err = field("key"); err == nil {
				o.val, err = field("value")
			}
		case opDelete, opMark:
			o.key, err = field("key")
		default:
			err = fmt.Errorf("unknown operation %d: %w", o.kind, ErrCorruption)
		}
		if err != nil {
			return nil, fmt.Errorf("operation %d: %w", len(ops), err)
		}
		// Stored keys gain up to two bytes of prefix.
		if len(o.key)+2 > bloomkv.MaxKeySize || (o.kind == opDeleteRange && len(o.val)+2 > bloomkv.MaxKeySize) {
			return nil, fmt.Errorf("operation %d: key of %d bytes: %w", len(ops), max(len(o.key), len(o.val)), bloomkv.ErrTooLarge)
		}
		if len(o.val) > bloomkv.MaxValueSize {
			return nil, fmt.Errorf("operation %d: value of %d bytes: %w", len(ops), len(o.val), bloomkv.ErrTooLarge)
		}
		if o.kind == opDeleteRange && len(o.val) > 0 && bytes.Compare(o.key, o.val) >= 0 {
			return nil, fmt.Errorf("operation %d: range deletion [%q, %q) is empty or inverted: %w", len(ops), o.key, o.val, ErrCorruption)
		}
		ops = append(ops, o)
	}
	return ops, nil
}

// addOps adds ops to b as stored keys.
func addOps(b *bloomkv.Batch, ops []op) error {
	for _, o := range ops {
		var err error
		switch o.kind {
		case opSet:
			err = b.Set(userKey(o.key), o.val)
		case opDelete:
			err = b.Delete(userKey(o.key))
		case opDeleteRange:
			end := userEnd
			if len(o.val) > 0 {
				end = userKey(o.val)
			}
			err = b.DeleteRange(userKey(o.key), end)
		case opSetMeta:
			err = b.Set(metaKey(o.key), o.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
