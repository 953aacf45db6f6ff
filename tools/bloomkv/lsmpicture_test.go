package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
)

// TestManifestLSMPicture replays the edits `manifest lsm --json` gives
// and checks they end in the tree the manifest itself replays to, with
// every table's key ranks ordered and in range; the HTML page embeds the
// same data and the script that draws it.
func TestManifestLSMPicture(t *testing.T) {
	f := newFixture(t)
	out, errOut, code := runTool("--json", "manifest", "lsm", f.manifest)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var pic lsmPicture
	if err := json.Unmarshal([]byte(out), &pic); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	levels := make([][]uint64, manifest.NumLevels)
	for i, ed := range pic.Edits {
		for _, d := range ed.Deleted {
			l := d[0]
			if j := slices.Index(levels[l], d[1]); j >= 0 {
				levels[l] = slices.Delete(levels[l], j, j+1)
			} else {
				t.Fatalf("edit %d deletes table %d, not in L%d", i, d[1], l)
			}
		}
		for _, a := range ed.Added {
			if a[2] > a[3] || a[3] >= uint64(len(pic.Keys)) {
				t.Fatalf("edit %d: table %d spans key ranks %d..%d of %d", i, a[1], a[2], a[3], len(pic.Keys))
			}
			levels[a[0]] = append(levels[a[0]], a[1])
		}
	}
	// The tree the manifest replays to, by the manifest package itself.
	data, err := os.ReadFile(f.manifest)
	if err != nil {
		t.Fatal(err)
	}
	r, err := record.NewReader(strings.NewReader(string(data)), f.manifest)
	if err != nil {
		t.Fatal(err)
	}
	v := &manifest.Version{}
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		ed, err := manifest.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if v, err = v.Apply(ed); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for l := range manifest.NumLevels {
		var want []uint64
		for _, fm := range v.Files(l) {
			want = append(want, fm.FileNum)
		}
		got := slices.Clone(levels[l])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("L%d: the picture's edits end with tables %v, the manifest with %v", l, got, want)
		}
		total += len(want)
	}
	if total == 0 {
		t.Fatal("the manifest's tree is empty: the test checked nothing")
	}
	page, errOut, code := runTool("manifest", "lsm", f.manifest)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"<!DOCTYPE html>", `<svg id="lsm"`, "const LSM = {", `"edits":`, "function draw()"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q", want)
		}
	}
}
