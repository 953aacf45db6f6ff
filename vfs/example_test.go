package vfs_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/vfs"
)

// ExampleNewErrorFS makes a store meet an I/O error, as a test of a
// program's error handling would.
func ExampleNewErrorFS() {
	fs := vfs.NewErrorFS(vfs.NewMem())
	db, err := bloomkv.Open("/db", &bloomkv.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	sync := vfs.OpSync
	fs.SetInjector(vfs.FailOnce(&sync, 0)) // the next fsync fails
	err = db.Set([]byte("k"), []byte("v"), bloomkv.Sync)
	fmt.Println(errors.Is(err, vfs.ErrInjected))
	db.Close()
	// Output:
	// true
}

// ExampleMemFS_CrashClone finds a store as a power loss would leave it:
// a write synced survives, one not synced is gone.
func ExampleMemFS_CrashClone() {
	fs := vfs.NewMem()
	db, err := bloomkv.Open("/db", &bloomkv.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	db.Set([]byte("synced"), []byte("1"), bloomkv.Sync)
	db.Set([]byte("not synced"), []byte("2"), bloomkv.NoSync)
	crashed := fs.CrashClone() // the disk after a power loss, db still open
	db.Close()

	after, err := bloomkv.Open("/db", &bloomkv.Options{FS: crashed})
	if err != nil {
		log.Fatal(err)
	}
	defer after.Close()
	_, err1 := after.Get([]byte("synced"))
	_, err2 := after.Get([]byte("not synced"))
	fmt.Println(err1 == nil, errors.Is(err2, bloomkv.ErrNotFound))
	// Output:
	// true true
}
