package main

// The db commands on a store Pebble wrote (internal/pebblestore): read
// without Pebble, through bloomkv's own readers of its manifest, WALs and
// tables, and nothing written.

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/pebblestore"
)

// withPebble runs fn on the Pebble store in dir and closes it.
func withPebble(dir string, fn func(s *pebblestore.Store) error) error {
	s, err := pebblestore.Open(dir)
	if err != nil {
		return err
	}
	err = fn(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// pebbleLSM prints a Pebble store's levels, as lsm does bloomkv's, after a
// line naming its format major version, manifest, OPTIONS file and WALs.
func (e *env) pebbleLSM(dir string, s *pebblestore.Store, fm *formats) error {
	out := lsmOut{Dir: dir, Format: "pebble", FormatVersion: s.FormatVersion, Manifest: s.Manifest, OptionsFile: s.Options, WALs: s.WALs}
	table := func(t pebblestore.Table) lsmTableOut {
		m := t.Meta
		out := lsmTableOut{File: filepath.Base(t.Path), Size: m.Size, Smallest: fm.k(m.Smallest.UserKey),
			Largest: fm.k(m.Largest.UserKey), Exclusive: m.Largest.SeqNum() == base.SeqNumMax,
			SmallestSeq: uint64(m.SmallestSeq), LargestSeq: uint64(m.LargestSeq)}
		if t.Pebble.Virtual {
			out.File, out.Backing = fmt.Sprintf("%06d.sst", m.FileNum), out.File
		}
		return out
	}
	for _, t := range s.Flushable {
		out.Flushable = append(out.Flushable, table(t))
	}
	for _, id := range slices.Sorted(maps.Keys(s.BlobFiles)) {
		b := s.BlobFiles[id]
		out.BlobFiles = append(out.BlobFiles, fmt.Sprintf("%06d.blob", b.FileNum))
	}
	for l := range s.Tables {
		lo := lsmLevelOut{Level: l, Tables: []lsmTableOut{}}
		for _, t := range s.Tables[l] {
			lo.Tables = append(lo.Tables, table(t))
			lo.Size += t.Meta.Size
		}
		out.Tables += len(lo.Tables)
		out.Size += lo.Size
		out.Levels = append(out.Levels, lo)
	}
	e.emitLSM(out, func(out lsmOut) {
		e.printf("%s: Pebble store, format major version %03d; %s, %s, WALs %s\n", dir, out.FormatVersion, out.Manifest, orNone(out.OptionsFile), orNone(strings.Join(out.WALs, " ")))
		for _, t := range out.Flushable {
			e.printf("  flushable ingest %s, %d bytes, sequence number %d (in a WAL, not yet in a level)\n", t.File, t.Size, t.SmallestSeq)
		}
		if len(out.BlobFiles) > 0 {
			e.printf("  blob files: %s\n", strings.Join(out.BlobFiles, " "))
		}
		e.printLSM(out)
	})
	return nil
}

func (e *env) pebbleGet(dir string, s *pebblestore.Store, key []byte, fm *formats) error {
	v, err := s.Get(key)
	return e.printGet(dir, key, v, errors.Is(err, pebblestore.ErrNotFound), err, fm)
}

func (e *env) pebbleScan(s *pebblestore.Store, fm *formats, b *bounds) error {
	n := 0
	return s.Scan(b.start, b.end, func(k, v []byte) bool {
		if b.count != 0 && n >= b.count {
			return false
		}
		n++
		e.printKV(fm, k, v)
		return true
	})
}

func (e *env) pebbleCheck(dir string, s *pebblestore.Store, verbose bool) error {
	st, problems := s.Check()
	out := dbCheckOut{Dir: dir, OK: len(problems) == 0, Tables: st.Tables, Blocks: st.Blocks, Entries: st.Entries,
		RangeDeletions: st.RangeDeletions, LiveKeys: st.LiveKeys}
	for _, p := range problems {
		out.Problems = append(out.Problems, p.Error())
	}
	e.printCheck(out, verbose)
	if len(problems) > 0 {
		err := problems[0]
		if len(problems) > 1 {
			err = fmt.Errorf("%w (and %d more problems)", err, len(problems)-1)
		}
		e.fail(err)
	}
	return nil
}

type optionsOut struct {
	Dir     string                       `json:"dir"`
	File    string                       `json:"file"`
	Options map[string]map[string]string `json:"options"` // by section, then name
}

func optionsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "options DIR",
		Short: "Print a Pebble store's OPTIONS file, section by section",
		Long: `Print the newest OPTIONS-NNNNNN file of a Pebble store: the options
Pebble was last opened with (format major version, comparer, merger, sizes,
levels), section by section in the file's order (with --json, one object of
sections of options).`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if !pebblestore.IsPebble(a[0]) {
				return fmt.Errorf("%s: not a Pebble store (no marker.manifest file): bloomkv stores have no OPTIONS file", a[0])
			}
			return withPebble(a[0], func(s *pebblestore.Store) error {
				secs, err := s.OptionsFile()
				if err != nil {
					return err
				}
				out := optionsOut{Dir: a[0], File: s.Options, Options: map[string]map[string]string{}}
				for _, sec := range secs {
					m := out.Options[sec.Name]
					if m == nil {
						m = map[string]string{}
						out.Options[sec.Name] = m
					}
					for _, kv := range sec.Options {
						m[kv[0]] = kv[1]
					}
				}
				if e.json {
					e.emit(out)
					return nil
				}
				e.printf("%s\n", filepath.Join(a[0], s.Options))
				for _, sec := range secs {
					e.printf("  [%s]\n", sec.Name)
					for _, kv := range sec.Options {
						e.printf("    %-48s %s\n", kv[0], kv[1])
					}
				}
				return nil
			})
		},
	}
}
