package bloomkv_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"sync/atomic"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// Example opens a store in a new directory, writes a key, reads it back
// and closes the store. It is the README's quick start, statement for
// statement (readme_test.go checks that the two agree).
func Example() {
	dir, err := os.MkdirTemp("", "bloomkv-quickstart")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := bloomkv.Open(dir, nil) // nil: the default Options
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Set([]byte("hello"), []byte("world"), bloomkv.Sync); err != nil {
		log.Fatal(err)
	}
	v, err := db.Get([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello=%s\n", v)
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello=world
}

// openMem opens a store on a file system in memory, as the examples below
// do to stay self-contained.
func openMem() *bloomkv.DB {
	db, err := bloomkv.Open("/db", &bloomkv.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// ExampleDB_Delete deletes a key: a Get of it then finds nothing.
func ExampleDB_Delete() {
	db := openMem()
	defer db.Close()
	db.Set([]byte("hello"), []byte("world"), bloomkv.NoSync)
	if err := db.Delete([]byte("hello"), bloomkv.NoSync); err != nil {
		log.Fatal(err)
	}
	_, err := db.Get([]byte("hello"))
	fmt.Println(errors.Is(err, bloomkv.ErrNotFound))
	// Output:
	// true
}

// ExampleDB_Apply writes several changes atomically: all of them survive a
// crash, or none.
func ExampleDB_Apply() {
	db := openMem()
	defer db.Close()

	b := db.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	b.Set([]byte("c"), []byte("3"))
	b.Set([]byte("e"), []byte("5"))
	b.DeleteRange([]byte("b"), []byte("d")) // deletes "c", written before it
	if err := db.Apply(b, bloomkv.Sync); err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"a", "c", "e"} {
		v, err := db.Get([]byte(k))
		fmt.Println(k, string(v), err)
	}
	// Output:
	// a 1 <nil>
	// c  bloomkv: not found
	// e 5 <nil>
}

// ExampleDB_NewIter walks the keys in [LowerBound, UpperBound), forward and
// backward.
func ExampleDB_NewIter() {
	db := openMem()
	defer db.Close()
	for _, k := range []string{"apple", "banana", "cherry", "damson", "elder"} {
		if err := db.Set([]byte(k), []byte("fruit"), bloomkv.NoSync); err != nil {
			log.Fatal(err)
		}
	}

	it, err := db.NewIter(&bloomkv.IterOptions{LowerBound: []byte("b"), UpperBound: []byte("e")})
	if err != nil {
		log.Fatal(err)
	}
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, string(it.Key())) // Key is valid until the next move
	}
	fmt.Println(keys)
	keys = keys[:0]
	for ok := it.SeekLT([]byte("d")); ok; ok = it.Prev() {
		keys = append(keys, string(it.Key()))
	}
	fmt.Println(keys)
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// [banana cherry damson]
	// [cherry banana]
}

// ExampleDB_NewSnapshot reads the store as it was when the snapshot was
// taken, whatever is written after.
func ExampleDB_NewSnapshot() {
	db := openMem()
	defer db.Close()
	db.Set([]byte("k"), []byte("old"), bloomkv.NoSync)

	snap, err := db.NewSnapshot()
	if err != nil {
		log.Fatal(err)
	}
	defer snap.Close()
	db.Set([]byte("k"), []byte("new"), bloomkv.NoSync)

	then, _ := snap.Get([]byte("k"))
	now, _ := db.Get([]byte("k"))
	fmt.Printf("snapshot: %s, now: %s\n", then, now)
	// Output:
	// snapshot: old, now: new
}

// ExampleDB_Compact merges everything into the last level, after which the
// differential-file filter says no key has changed since.
func ExampleDB_Compact() {
	db := openMem()
	defer db.Close()
	for i := range 1000 {
		db.Set(fmt.Appendf(nil, "key%04d", i), []byte("v"), bloomkv.NoSync)
	}
	if err := db.Compact(nil, nil); err != nil {
		log.Fatal(err)
	}
	m := db.Metrics()
	fmt.Println("tables in the last level:", m.Levels[bloomkv.NumLevels-1].Files)
	fmt.Println("key0042 changed since:", db.MayHaveChanged([]byte("key0042")))

	db.Set([]byte("key0042"), []byte("w"), bloomkv.NoSync)
	fmt.Println("key0042 changed since:", db.MayHaveChanged([]byte("key0042")))
	// Output:
	// tables in the last level: 1
	// key0042 changed since: false
	// key0042 changed since: true
}

// ExampleDB_Metrics reads the store's counters.
func ExampleDB_Metrics() {
	db := openMem()
	defer db.Close()
	db.Set([]byte("k"), []byte("v"), bloomkv.NoSync)
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}
	db.Get([]byte("k"))
	m := db.Metrics()
	fmt.Println("flushes:", m.Flushes)
	fmt.Println("level-0 tables:", m.Levels[0].Files)
	// fmt.Println(m) prints every counter as a table.
	// Output:
	// flushes: 1
	// level-0 tables: 1
}

// countingFS is a file system of the program's own: it counts the files a
// store creates, passing every call on to the FS it wraps. Embedding
// vfs.FS makes it one; a program may implement every method itself.
type countingFS struct {
	vfs.FS
	creates atomic.Int64
}

func (c *countingFS) Create(name string) (vfs.File, error) {
	c.creates.Add(1)
	return c.FS.Create(name)
}

// ExampleOptions_fS puts a store on a file system of the program's own.
func ExampleOptions_fS() {
	fs := &countingFS{FS: vfs.NewMem()}
	db, err := bloomkv.Open("/db", &bloomkv.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("files created:", fs.creates.Load() > 0)
	// Output:
	// files created: true
}

// ExampleOpen_locked shows that a directory is open in one DB at a time.
func ExampleOpen_locked() {
	fs := vfs.NewMem()
	db := must(bloomkv.Open("/db", &bloomkv.Options{FS: fs}))
	defer db.Close()
	_, err := bloomkv.Open("/db", &bloomkv.Options{FS: fs})
	fmt.Println(errors.Is(err, bloomkv.ErrLocked))
	// Output:
	// true
}

func must(db *bloomkv.DB, err error) *bloomkv.DB {
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// ExampleDB_Checkpoint copies a store, while it may take writes, into a
// directory that opens as a store of its own.
func ExampleDB_Checkpoint() {
	fs := vfs.NewMem()
	db := must(bloomkv.Open("/db", &bloomkv.Options{FS: fs}))
	db.Set([]byte("k"), []byte("v1"), bloomkv.NoSync)
	if err := db.Checkpoint("/backup"); err != nil {
		log.Fatal(err)
	}
	db.Set([]byte("k"), []byte("v2"), bloomkv.NoSync) // after: not in the copy
	db.Close()

	backup := must(bloomkv.Open("/backup", &bloomkv.Options{FS: fs}))
	defer backup.Close()
	v, _ := backup.Get([]byte("k"))
	fmt.Printf("%s\n", v)
	// Output:
	// v1
}

// ExampleDB_Ingest writes a table with sstable.Writer and adds it to a
// store whole: its keys appear at once, newer than every earlier write.
func ExampleDB_Ingest() {
	fs := vfs.NewMem()
	db := must(bloomkv.Open("/db", &bloomkv.Options{FS: fs}))
	defer db.Close()
	db.Set([]byte("b"), []byte("old"), bloomkv.NoSync)

	f, err := fs.Create("/load.sst")
	if err != nil {
		log.Fatal(err)
	}
	w, err := sstable.NewWriter(f, sstable.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} { // in increasing order
		if err := w.Set([]byte(k), []byte("loaded")); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	f.Close()

	if err := db.Ingest([]string{"/load.sst"}); err != nil {
		log.Fatal(err)
	}
	v, _ := db.Get([]byte("b"))
	fmt.Printf("b=%s, tables ingested: %d\n", v, db.Metrics().IngestedTables)
	// Output:
	// b=loaded, tables ingested: 1
}

// ExampleDB_FormatVersion reads the format version a new store is created
// at, the newest this build writes.
func ExampleDB_FormatVersion() {
	db := openMem()
	defer db.Close()
	fmt.Println(db.FormatVersion() == bloomkv.FormatNewest)
	// Output:
	// true
}
