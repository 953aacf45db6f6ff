package bloomkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/vfs"
)

// manifestEdits reads the edits of the store's current manifest, raw.
func manifestEdits(t *testing.T, fs vfs.FS) [][]byte {
	t.Helper()
	name := manifestFile(t, fs)
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := record.NewReader(f, name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), rec...))
	}
}

// firstEdit decodes the first edit of the store's current manifest.
func firstEdit(t *testing.T, fs vfs.FS) *manifest.VersionEdit {
	t.Helper()
	edits := manifestEdits(t, fs)
	if len(edits) == 0 {
		t.Fatal("the manifest holds no edit")
	}
	e, err := manifest.Decode(edits[0])
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// writeManifestByHand makes /db a store whose manifest holds the given
// encoded edits, as a build of another version might have written it.
func writeManifestByHand(t *testing.T, fs vfs.FS, edits ...[]byte) {
	t.Helper()
	if err := fs.MkdirAll("/db"); err != nil {
		t.Fatal(err)
	}
	const num = 1
	f, err := fs.Create("/db/" + manifestName(num))
	if err != nil {
		t.Fatal(err)
	}
	w := record.NewWriter(f, 0)
	for _, e := range edits {
		if _, err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := setCurrent(fs, "/db", num); err != nil {
		t.Fatal(err)
	}
}

// originalStore writes by hand a store as builds from before format
// versions left it: tags 1 to 7 only.
func originalStore(t *testing.T) *vfs.MemFS {
	fs := vfs.NewMem()
	writeManifestByHand(t, fs,
		(&manifest.VersionEdit{ComparerName: base.ComparerName, LogNumber: 2, NextFileNum: 3, LastSeq: 10}).Encode(),
		(&manifest.VersionEdit{NextFileNum: 3, LastSeq: 10, ClosedLog: manifest.ClosedLog{Num: 2, Size: 0}}).Encode())
	return fs
}

func TestFormatVersionConstants(t *testing.T) {
	if FormatNewest != manifest.NewestFormat {
		t.Fatalf("FormatNewest is %v, but the manifest package decodes up to %d", FormatNewest, manifest.NewestFormat)
	}
	for v := FormatOriginal; v <= FormatNewest; v++ {
		if strings.Contains(v.String(), "unknown") {
			t.Errorf("%d has no name: %s", uint64(v), v)
		}
	}
	if !strings.Contains((FormatNewest + 1).String(), "unknown") {
		t.Errorf("%s", FormatNewest+1)
	}
}

func TestNewStoreRecordsNewestFormat(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	if got := d.FormatVersion(); got != FormatNewest {
		t.Fatalf("new store at %v, want %v", got, FormatNewest)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	edits := manifestEdits(t, fs)
	if edits[0][0] != 8 {
		t.Fatalf("the first edit starts with tag %d, not the format version (8)", edits[0][0])
	}
	if e := firstEdit(t, fs); e.FormatVersion != uint64(FormatNewest) {
		t.Fatalf("first edit records format %d, want %d", e.FormatVersion, FormatNewest)
	}
	// Reopened, it stays there, and the new manifest records it first too.
	d = mustOpen(t, "/db", memOpts(fs))
	if got := d.FormatVersion(); got != FormatNewest {
		t.Fatalf("reopened at %v", got)
	}
	d.Close()
	if e := firstEdit(t, fs); e.FormatVersion != uint64(FormatNewest) {
		t.Fatalf("reopened: first edit records format %d", e.FormatVersion)
	}
}

func TestOriginalFormatStore(t *testing.T) {
	fs := originalStore(t)
	d := mustOpen(t, "/db", memOpts(fs))
	if got := d.FormatVersion(); got != FormatOriginal {
		t.Fatalf("store without a recorded version opened at %v", got)
	}
	if err := d.Set([]byte("k"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Open kept the format: its new manifest records no version, so that
	// builds from before versions still open the store.
	if e := firstEdit(t, fs); e.FormatVersion != 0 {
		t.Fatalf("an open of an original store recorded format %d", e.FormatVersion)
	}
	for _, e := range manifestEdits(t, fs) {
		if e[0] == 8 {
			t.Fatal("an edit of the original store records a format version")
		}
	}

	// Options.FormatVersion newer than the store's ratchets it at Open.
	o := memOpts(fs)
	o.FormatVersion = FormatVersioned
	d = mustOpen(t, "/db", o)
	if got := d.FormatVersion(); got != FormatVersioned {
		t.Fatalf("Open asked for %v: store at %v", FormatVersioned, got)
	}
	expect(t, d, "k", "v")
	d.Close()
	if e := firstEdit(t, fs); e.FormatVersion != uint64(FormatVersioned) {
		t.Fatalf("ratcheted at Open: first edit records %d", e.FormatVersion)
	}
	// No downgrade: asking for an older version opens at the store's.
	o.FormatVersion = FormatOriginal
	d = mustOpen(t, "/db", o)
	if got := d.FormatVersion(); got != FormatVersioned {
		t.Fatalf("Options.FormatVersion=FormatOriginal downgraded the store to %v", got)
	}
	d.Close()
}

func TestRatchetFormatVersion(t *testing.T) {
	fs := originalStore(t)
	d := mustOpen(t, "/db", memOpts(fs))
	if err := d.RatchetFormatVersion(FormatOriginal); err != nil || d.FormatVersion() != FormatOriginal {
		t.Fatalf("ratchet to the same version: %v, at %v", err, d.FormatVersion())
	}
	if err := d.RatchetFormatVersion(FormatNewest + 1); !errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("ratchet past FormatNewest: %v", err)
	}
	if err := d.RatchetFormatVersion(FormatVersioned); err != nil {
		t.Fatal(err)
	}
	if got := d.FormatVersion(); got != FormatVersioned {
		t.Fatalf("after the ratchet: %v", got)
	}
	if err := d.RatchetFormatVersion(FormatOriginal); err != nil || d.FormatVersion() != FormatVersioned {
		t.Fatalf("a lower version: %v, at %v (no downgrade)", err, d.FormatVersion())
	}
	// A crash right after: the edit is durable.
	image := fs.CrashClone()
	d.Close()
	d = mustOpen(t, "/db", memOpts(image))
	if got := d.FormatVersion(); got != FormatVersioned {
		t.Fatalf("after a crash: %v", got)
	}
	d.Close()
	if err := d.RatchetFormatVersion(FormatNewest); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	o := memOpts(image)
	o.ReadOnly = true
	o.FormatVersion = FormatNewest
	d = mustOpen(t, "/db", o)
	defer d.Close()
	if err := d.RatchetFormatVersion(FormatNewest); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only: %v", err)
	}
}

func TestNewerFormatRefused(t *testing.T) {
	newer := uint64(FormatNewest + 1)
	first := binary.AppendUvarint([]byte{8}, newer)
	for name, edit := range map[string][]byte{
		"newer version": append(first, (&manifest.VersionEdit{ComparerName: base.ComparerName, NextFileNum: 3}).Encode()...),
		// A newer build may use tags this one does not know: the version,
		// read first, says so before the tag is met.
		"newer version, unknown tag": binary.AppendUvarint(binary.AppendUvarint(append([]byte(nil), first...), 42), 7),
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeManifestByHand(t, fs, edit)
			for _, ro := range []bool{false, true} {
				o := memOpts(fs)
				o.ReadOnly = ro
				_, err := Open("/db", o)
				if !errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrCorruption) {
					t.Fatalf("read-only %v: %v, want ErrUnsupportedFormat and not ErrCorruption", ro, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, fmt.Sprintf("format version %d", newer)) || !strings.Contains(msg, FormatNewest.String()) ||
					!strings.Contains(msg, "MANIFEST-000001") {
					t.Fatalf("%q does not name both versions and the file", msg)
				}
			}
		})
	}
	// A version raised by a later edit (RatchetFormatVersion of a newer
	// build) is refused the same way.
	fs := vfs.NewMem()
	writeManifestByHand(t, fs,
		(&manifest.VersionEdit{FormatVersion: uint64(FormatVersioned), ComparerName: base.ComparerName, NextFileNum: 3}).Encode(),
		binary.AppendUvarint(binary.AppendUvarint(append([]byte(nil), first...), 42), 7))
	if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrCorruption) {
		t.Fatalf("raised by a later edit: %v", err)
	}
	// An unknown tag in a store of a known version is corruption.
	fs = vfs.NewMem()
	writeManifestByHand(t, fs, binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint([]byte{8}, uint64(FormatNewest)), 42), 7))
	if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) || errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("unknown tag at a known version: %v", err)
	}
	// And so is a version that goes down.
	fs = vfs.NewMem()
	writeManifestByHand(t, fs,
		(&manifest.VersionEdit{FormatVersion: uint64(FormatVersioned), ComparerName: base.ComparerName, NextFileNum: 3}).Encode(),
		(&manifest.VersionEdit{FormatVersion: uint64(FormatOriginal)}).Encode())
	if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("a version going down: %v", err)
	}
	// Options.FormatVersion beyond this build's.
	o := memOpts(vfs.NewMem())
	o.FormatVersion = FormatNewest + 1
	if _, err := Open("/db", o); !errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("Options.FormatVersion %v: %v", o.FormatVersion, err)
	}
}

func TestNewStoreAtOlderFormat(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	o.FormatVersion = FormatOriginal
	d := mustOpen(t, "/db", o)
	if got := d.FormatVersion(); got != FormatOriginal {
		t.Fatalf("created at %v", got)
	}
	d.Close()
	if e := firstEdit(t, fs); e.FormatVersion != 0 {
		t.Fatalf("a FormatOriginal store records version %d", e.FormatVersion)
	}
}

// TestIngestTagNeedsFormatIngest: a table recorded with a sequence-number
// override in a store whose version predates FormatIngest is corruption.
func TestIngestTagNeedsFormatIngest(t *testing.T) {
	m := &manifest.FileMetadata{FileNum: 5, Size: 100,
		Smallest: base.MakeInternalKey([]byte("a"), 7, base.KindSet), Largest: base.MakeInternalKey([]byte("b"), 7, base.KindSet),
		SmallestSeq: 7, LargestSeq: 7, SeqNumOverride: 7}
	for _, v := range []FormatVersion{FormatOriginal, FormatVersioned} {
		fs := vfs.NewMem()
		first := &manifest.VersionEdit{ComparerName: base.ComparerName, NextFileNum: 6, LastSeq: 7}
		if v >= FormatVersioned {
			first.FormatVersion = uint64(v)
		}
		writeManifestByHand(t, fs, first.Encode(), (&manifest.VersionEdit{NewFiles: []manifest.NewFile{{Level: 6, Meta: m}}}).Encode())
		_, err := Open("/db", memOpts(fs))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "cannot record") {
			t.Fatalf("%v: %v", v, err)
		}
	}
}
