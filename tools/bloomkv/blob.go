package main

// The blob commands: Pebble's blob files (NNNNNN.blob), which hold the
// values Pebble separates from its tables (format major version 024 on).

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/internal/blobfile"
)

func blobCmd(e *env) *cobra.Command {
	var fm formats
	dump := &cobra.Command{
		Use:   "dump FILE...",
		Short: "Print a blob file's footer, index and blocks, and every value",
		Long: `Print a Pebble blob file (NNNNNN.blob): its footer (format version,
checksum type, original file number), its index block, the virtual blocks of
a rewritten file (each original block number and the block now holding its
values), then each value block (offset, length without the 5-byte trailer,
compression, decoded length) followed by its values, each with its number in
the block and its length. A damaged block is reported and the other blocks
are still read.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			e.eachBlob(files, func(name string, r *blobfile.Reader) error { return e.blobDump(name, r, &fm, true) })
			return nil
		},
	}
	fm.e, fm.value = e, formatQuoted
	dump.Flags().Var(&fm.value, "value-format", "how to print values: quoted, hex, size or null")
	layout := &cobra.Command{
		Use:   "layout FILE...",
		Short: "List a blob file's blocks with offsets, lengths, compression and value counts",
		Long: `List a Pebble blob file's footer, index block, virtual blocks (of a
rewritten file) and value blocks, as blob dump does, without the values.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			e.eachBlob(files, func(name string, r *blobfile.Reader) error { return e.blobDump(name, r, nil, false) })
			return nil
		},
	}
	return group("blob", "Inspect Pebble's blob files", dump, layout)
}

// eachBlob opens every file as a blob file and calls fn; a file that cannot
// be opened is reported, naming it, and skipped.
func (e *env) eachBlob(files []string, fn func(name string, r *blobfile.Reader) error) {
	for _, name := range files {
		err := openBlob(name, func(r *blobfile.Reader) error { return fn(name, r) })
		if err != nil {
			e.fail(fmt.Errorf("%s: %w", name, err))
		}
	}
}

// openBlob opens the blob file name, calls fn and closes it.
func openBlob(name string, fn func(r *blobfile.Reader) error) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("a directory, not a blob file")
	}
	r, err := blobfile.Open(f, st.Size())
	if err != nil {
		return err
	}
	defer r.Close()
	return fn(r)
}

type blobFileOut struct {
	File            string           `json:"file"`
	Format          uint8            `json:"format"`
	Checksum        string           `json:"checksum"`
	FileSize        uint64           `json:"file_size"`
	OriginalFileNum uint64           `json:"original_file_num"`
	FooterOffset    uint64           `json:"footer_offset"`
	Index           blobBlockOut     `json:"index"`
	Virtual         []blobVirtualOut `json:"virtual_blocks,omitempty"`
	Blocks          []blobBlockOut   `json:"blocks"`
	Values          int              `json:"values"`
	valuesOf        [][]blobValueOut // each block's values, for dump
}

type blobBlockOut struct {
	Block         int    `json:"block"` // -1 for the index block
	Offset        uint64 `json:"offset"`
	Length        uint64 `json:"length"`
	Compression   string `json:"compression,omitempty"`
	DecodedLength int    `json:"decoded_length,omitempty"`
	Values        int    `json:"values"`
	Checksum      string `json:"checksum"` // ok or bad
	Error         string `json:"error,omitempty"`
}

type blobVirtualOut struct {
	Block         int    `json:"block"`
	Physical      *int   `json:"physical"` // nil: the rewrite dropped the block's values
	ValueIDOffset uint32 `json:"value_id_offset"`
}

type blobValueOut struct {
	File   string `json:"file"`
	Block  int    `json:"block"`
	ID     int    `json:"id"`
	Length int    `json:"length"`
	Value  string `json:"value"`
}

// blobDump prints a blob file's layout and, with values, every value in
// fm's format. A damaged block is printed as such and then reported.
func (e *env) blobDump(name string, r *blobfile.Reader, fm *formats, values bool) error {
	ft := r.Footer()
	out := blobFileOut{File: name, Format: ft.Format, Checksum: ft.ChecksumType.String(), FileSize: r.Size(),
		OriginalFileNum: ft.OriginalFileNum, FooterOffset: ft.Offset,
		Index: blobBlockOut{Block: -1, Offset: ft.Index.Offset, Length: ft.Index.Length, Compression: r.IndexCompression().String(), Checksum: "ok"}}
	for i, v := range r.Virtual() {
		vo := blobVirtualOut{Block: i, ValueIDOffset: v.ValueIDOffset}
		if v.Physical != blobfile.NoBlock {
			p := int(v.Physical)
			vo.Physical = &p
		}
		out.Virtual = append(out.Virtual, vo)
	}
	var bad error
	for i := range r.NumBlocks() {
		h := r.BlockHandle(i)
		bo := blobBlockOut{Block: i, Offset: h.Offset, Length: h.Length, Checksum: "ok"}
		var vals []blobValueOut
		b, err := r.Block(i)
		if err != nil {
			bo.Checksum, bo.Error = "bad", err.Error()
			if bad == nil {
				bad = err
			}
		} else {
			bo.Compression, bo.DecodedLength, bo.Values = b.Compression.String(), b.DecodedLen, b.Len()
			for j := 0; values && j < b.Len(); j++ {
				v := b.Value(j)
				vals = append(vals, blobValueOut{File: name, Block: i, ID: j, Length: len(v), Value: fm.v(v)})
			}
		}
		out.Values += bo.Values
		out.Blocks = append(out.Blocks, bo)
		out.valuesOf = append(out.valuesOf, vals)
	}
	e.printBlob(out)
	return bad
}

// printBlob prints what blobDump gathered: in JSON the file's object, then
// one object per value.
func (e *env) printBlob(out blobFileOut) {
	if e.json {
		e.emit(out)
		for _, vals := range out.valuesOf {
			for _, v := range vals {
				e.emit(v)
			}
		}
		return
	}
	e.printf("%s: Pebble blob file, format %d, %s checksums, %d bytes, %s, %s\n", out.File, out.Format, out.Checksum, out.FileSize,
		plural(len(out.Blocks), "value block"), plural(out.Values, "value"))
	e.printf("  footer at offset %d (%d bytes), original file %06d\n", out.FooterOffset, blobfile.FooterLen, out.OriginalFileNum)
	e.printf("  index block at offset %d, length %d, %s\n", out.Index.Offset, out.Index.Length, out.Index.Compression)
	if len(out.Virtual) > 0 {
		e.printf("  virtual blocks (a rewritten file):\n")
		for _, v := range out.Virtual {
			if v.Physical == nil {
				e.printf("    %d -> (dropped)\n", v.Block)
			} else {
				e.printf("    %d -> block %d, value ids +%d\n", v.Block, *v.Physical, v.ValueIDOffset)
			}
		}
	}
	for i, b := range out.Blocks {
		if b.Error != "" {
			e.printf("  block %d at offset %d, length %d: bad: %s\n", b.Block, b.Offset, b.Length, b.Error)
			continue
		}
		e.printf("  block %d at offset %d, length %d, %s, %d bytes decoded, %s\n", b.Block, b.Offset, b.Length, b.Compression, b.DecodedLength, plural(b.Values, "value"))
		for _, v := range out.valuesOf[i] {
			e.printf("    %d  %d bytes  %s\n", v.ID, v.Length, v.Value)
		}
	}
}
