package bloomkv

import (
	"flag"
	"fmt"
	"go/constant"
	"go/types"
	"os"
	"sort"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite api.txt from the code")

// apiFile lists the exported surface of the public packages, one line per
// name, as Go's own api/ files do: what review sees change.
const apiFile = "api.txt"

// TestAPIFile compares the exported names and signatures of every public
// package with api.txt, so that every change of the surface shows in a
// diff of that file (go test -run TestAPIFile -update-api . rewrites it).
func TestAPIFile(t *testing.T) {
	got := strings.Join(apiLines(t), "\n") + "\n"
	if *updateAPI {
		if err := os.WriteFile(apiFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(apiFile)
	if err != nil {
		t.Fatalf("%v (go test -run TestAPIFile -update-api . writes it)", err)
	}
	if got == string(want) {
		return
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(want), "\n") {
		have[l] = true
	}
	now := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		now[l] = true
		if !have[l] {
			t.Errorf("+ %s", l)
		}
	}
	for _, l := range strings.Split(string(want), "\n") {
		if !now[l] {
			t.Errorf("- %s", l)
		}
	}
	t.Errorf("the exported API differs from %s (+ added, - removed): if the change is meant, rewrite it with go test -run TestAPIFile -update-api .", apiFile)
}

// apiLines describes every exported name of the public packages, sorted.
func apiLines(t *testing.T) []string {
	pkgs, err := publicTypes()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range pkgs {
		qual := func(other *types.Package) string {
			if other == p {
				return ""
			}
			return other.Name()
		}
		add := func(format string, args ...any) {
			lines = append(lines, "pkg "+p.Name()+", "+fmt.Sprintf(format, args...))
		}
		for _, name := range p.Scope().Names() {
			obj := p.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			switch o := obj.(type) {
			case *types.Const:
				add("const %s %s = %s", name, types.TypeString(o.Type(), qual), constValue(o.Val()))
			case *types.Var:
				add("var %s %s", name, types.TypeString(o.Type(), qual))
			case *types.Func:
				add("func %s%s", name, strings.TrimPrefix(types.TypeString(o.Type(), qual), "func"))
			case *types.TypeName:
				if o.IsAlias() {
					add("type %s = %s", name, types.TypeString(types.Unalias(o.Type()), qual))
					continue
				}
				describeType(add, name, o.Type().(*types.Named), qual)
			}
		}
	}
	sort.Strings(lines)
	return lines
}

// describeType adds the lines of a defined type: its kind, its exported
// fields or interface methods, and its exported methods.
func describeType(add func(string, ...any), name string, n *types.Named, qual types.Qualifier) {
	switch u := n.Underlying().(type) {
	case *types.Struct:
		add("type %s struct", name)
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case f.Embedded():
				add("type %s struct, embedded %s", name, types.TypeString(f.Type(), qual))
			case f.Exported():
				add("type %s struct, %s %s", name, f.Name(), types.TypeString(f.Type(), qual))
			}
		}
	case *types.Interface:
		add("type %s interface", name)
		for i := range u.NumMethods() {
			if m := u.Method(i); m.Exported() {
				add("type %s interface, %s%s", name, m.Name(), strings.TrimPrefix(types.TypeString(m.Type(), qual), "func"))
			}
		}
	default:
		add("type %s %s", name, types.TypeString(u, qual))
	}
	ms := types.NewMethodSet(types.NewPointer(n))
	for i := range ms.Len() {
		m := ms.At(i).Obj().(*types.Func)
		if !m.Exported() || len(ms.At(i).Index()) > 1 {
			continue // unexported, or promoted from an embedded field
		}
		recv := name
		if _, ptr := m.Type().(*types.Signature).Recv().Type().(*types.Pointer); ptr {
			recv = "*" + name
		}
		add("method (%s) %s%s", recv, m.Name(), strings.TrimPrefix(types.TypeString(m.Type(), qual), "func"))
	}
}

// constValue prints a constant's value, short.
func constValue(v constant.Value) string {
	s := v.ExactString()
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}
