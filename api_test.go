package bloomkv

import (
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"sort"
	"strings"
	"sync"
	"testing"
)

// publicPackages are the packages whose exported API outside programs use.
var publicPackages = []string{
	"github.com/bloomkv/bloomkv",
	"github.com/bloomkv/bloomkv/memtable",
	"github.com/bloomkv/bloomkv/sstable",
	"github.com/bloomkv/bloomkv/filterblock",
	"github.com/bloomkv/bloomkv/difffile",
	"github.com/bloomkv/bloomkv/semijoin",
	"github.com/bloomkv/bloomkv/raftstore",
	"github.com/bloomkv/bloomkv/vfs",
}

// publicTypes type-checks publicPackages from source, once for the tests
// that read their API: the check of every package and its dependencies is
// most of each test's time, and what it returns is only read.
var publicTypes = sync.OnceValues(func() ([]*types.Package, error) {
	imp := importer.ForCompiler(token.NewFileSet(), "source", nil)
	var pkgs []*types.Package
	for _, path := range publicPackages {
		p, err := imp.Import(path)
		if err != nil {
			return nil, fmt.Errorf("type-checking %s: %w", path, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
})

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// TestPublicAPINamesNoInternalType type-checks every public package and walks
// each exported identifier's type: every named type it can reach (through
// fields, parameters, results, methods, embedded interfaces) must be one an
// outside program can name, either defined in a public package or given a
// name there by an alias.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	pkgs, err := publicTypes()
	if err != nil {
		t.Fatal(err)
	}
	aliased := map[*types.TypeName]bool{}
	for _, p := range pkgs {
		for _, name := range p.Scope().Names() {
			if a, ok := p.Scope().Lookup(name).(*types.TypeName); ok && a.Exported() && a.IsAlias() {
				if n, ok := types.Unalias(a.Type()).(*types.Named); ok {
					aliased[n.Obj()] = true
				}
			}
		}
	}
	leaks := map[string][]string{}
	seen := map[types.Type]bool{}
	var walk func(typ types.Type, where string)
	walk = func(typ types.Type, where string) {
		if typ == nil || seen[typ] {
			return
		}
		seen[typ] = true
		switch tt := typ.(type) {
		case *types.Alias:
			walk(types.Unalias(tt), where)
		case *types.Named:
			obj := tt.Obj()
			if obj.Pkg() != nil && isInternal(obj.Pkg().Path()) && !aliased[obj] {
				key := obj.Pkg().Path() + "." + obj.Name()
				leaks[key] = append(leaks[key], where)
			}
			if obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path(), "github.com/bloomkv/bloomkv") {
				return // a standard-library or third-party type
			}
			if !obj.Exported() && !isInternal(obj.Pkg().Path()) {
				// An unexported type of a public package: its exported
				// methods and fields are still reachable.
			}
			for i := range tt.NumMethods() {
				if m := tt.Method(i); m.Exported() {
					walk(m.Type(), obj.Name()+"."+m.Name())
				}
			}
			walk(tt.Underlying(), obj.Name())
		case *types.Pointer:
			walk(tt.Elem(), where)
		case *types.Slice:
			walk(tt.Elem(), where)
		case *types.Array:
			walk(tt.Elem(), where)
		case *types.Map:
			walk(tt.Key(), where)
			walk(tt.Elem(), where)
		case *types.Chan:
			walk(tt.Elem(), where)
		case *types.Signature:
			for i := range tt.Params().Len() {
				walk(tt.Params().At(i).Type(), where)
			}
			for i := range tt.Results().Len() {
				walk(tt.Results().At(i).Type(), where)
			}
		case *types.Struct:
			for i := range tt.NumFields() {
				if f := tt.Field(i); f.Exported() {
					walk(f.Type(), where+"."+f.Name())
				}
			}
		case *types.Interface:
			for i := range tt.NumMethods() {
				if m := tt.Method(i); m.Exported() {
					walk(m.Type(), where+"."+m.Name())
				}
			}
		}
	}
	for _, p := range pkgs {
		for _, name := range p.Scope().Names() {
			obj := p.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			walk(obj.Type(), p.Name()+"."+name)
		}
	}
	var msgs []string
	for k, where := range leaks {
		sort.Strings(where)
		if len(where) > 4 {
			where = append(where[:4], "...")
		}
		msgs = append(msgs, k+" (in "+strings.Join(where, ", ")+")")
	}
	sort.Strings(msgs)
	for _, m := range msgs {
		t.Errorf("exported API reaches %s, which an outside program cannot name", m)
	}
}
