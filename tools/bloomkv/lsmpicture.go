package main

import (
	"encoding/json"
	"fmt"
	"html"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/internal/manifest"
)

func manifestLSMCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "lsm FILE",
		Short: "Write an HTML page that pictures the LSM tree after each edit of a manifest",
		Long: `Replay a manifest (bloomkv's or Pebble's) and write, to standard output,
a self-contained HTML page: one row per level, each table a box spanning its
key range (keys placed by their rank among every table bound the manifest
names) and shaded by age, with a slider that steps through the edits. The
page holds the edits, not a copy of the tree per edit, and replays them in
the browser. With --json, the same data as JSON.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error { return e.manifestLSM(a[0]) },
	}
}

// lsmPicture is the data the page draws: the table bounds' user keys in
// order, and each edit's added and deleted tables. A table is [level, file
// number, rank of its smallest key, rank of its largest key, bytes]; a
// deletion [level, file number].
type lsmPicture struct {
	File  string       `json:"file"`
	Keys  []string     `json:"keys"`
	Edits []lsmEditOut `json:"edits"`
}

type lsmEditOut struct {
	Kind    string      `json:"kind"`
	Added   [][5]uint64 `json:"added,omitempty"`
	Deleted [][2]uint64 `json:"deleted,omitempty"`
}

func (e *env) manifestLSM(name string) error {
	rp, err := replayManifest(name)
	if err != nil {
		return err
	}
	if rp.decodeErr != nil {
		return rp.decodeErr
	}
	keySet := map[string]bool{}
	for _, ed := range rp.edits {
		for _, nf := range ed.NewFiles {
			keySet[string(nf.Meta.Smallest.UserKey)] = true
			keySet[string(nf.Meta.Largest.UserKey)] = true
		}
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := func(k []byte) uint64 {
		i, _ := slices.BinarySearch(keys, string(k))
		return uint64(i)
	}
	pic := lsmPicture{File: name, Keys: make([]string, len(keys))}
	for i, k := range keys {
		pic.Keys[i] = fmt.Sprintf("%q", k)
	}
	v := &manifest.Version{}
	for i, ed := range rp.edits {
		// Replayed here too, so that a manifest the page could not draw
		// (a deletion of a table not there) fails with the edit named.
		if v, err = v.Apply(ed.VersionEdit); err != nil {
			return fmt.Errorf("%s: edit %d at offset %d: %w (manifest check lists every problem)", name, i, rp.recs[i].off, err)
		}
		out := lsmEditOut{Kind: editKind(ed.VersionEdit)}
		for _, d := range ed.DeletedFiles {
			out.Deleted = append(out.Deleted, [2]uint64{uint64(d.Level), d.FileNum})
		}
		for _, nf := range ed.NewFiles {
			m := nf.Meta
			out.Added = append(out.Added, [5]uint64{uint64(nf.Level), m.FileNum, rank(m.Smallest.UserKey), rank(m.Largest.UserKey), m.Size})
		}
		pic.Edits = append(pic.Edits, out)
	}
	if e.json {
		e.emit(pic)
		return nil
	}
	data, err := json.Marshal(pic)
	if err != nil {
		return err
	}
	// </script> cannot appear in the JSON: json.Marshal escapes < and >.
	e.printf("%s", strings.Replace(lsmPage, "{{TITLE}}", html.EscapeString(name), 1))
	e.printf("<script>const LSM = %s;\n%s</script>\n</body></html>\n", data, lsmScript)
	return nil
}

const lsmPage = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>LSM of {{TITLE}}</title>
<style>
body { font: 13px sans-serif; margin: 1em; }
svg { border: 1px solid #ccc; background: #fafafa; }
rect.t { stroke: #333; stroke-width: 0.5; }
#info { margin: 0.5em 0; font-family: monospace; white-space: pre; }
</style></head><body>
<h3>LSM of {{TITLE}}</h3>
<div><input id="edit" type="range" min="0" value="0" style="width: 60em">
<span id="label"></span></div>
<svg id="lsm" width="1000" height="300"></svg>
<div id="info">hover over a table</div>
`

const lsmScript = `
const W = 1000, RH = 40, LEFT = 40, N = LSM.keys.length;
const svg = document.getElementById("lsm"), slider = document.getElementById("edit");
const label = document.getElementById("label"), info = document.getElementById("info");
slider.max = LSM.edits.length - 1;
slider.value = LSM.edits.length - 1;
function x(rank) { return LEFT + (W - LEFT - 10) * (N > 1 ? rank / (N - 1) : 0.5); }
function stateAt(n) {
  const levels = [[], [], [], [], [], [], []];
  for (let i = 0; i <= n; i++) {
    const ed = LSM.edits[i];
    for (const [l, f] of ed.deleted || []) levels[l] = levels[l].filter(t => t[1] !== f);
    for (const t of ed.added || []) levels[t[0]].push(t);
  }
  return levels;
}
function draw() {
  const n = +slider.value, levels = stateAt(n);
  let maxFile = 1;
  for (const lv of levels) for (const t of lv) maxFile = Math.max(maxFile, t[1]);
  let s = "";
  levels.forEach((lv, l) => {
    const y = 10 + l * RH;
    s += '<text x="4" y="' + (y + RH / 2) + '">L' + l + '</text>';
    const bytes = lv.reduce((a, t) => a + t[4], 0);
    s += '<text x="' + (W - 8) + '" y="' + (y + 12) + '" text-anchor="end" font-size="10">' + lv.length + ' tables, ' + (bytes / 1048576).toFixed(2) + ' MiB</text>';
    lv.forEach((t, i) => {
      const x0 = x(t[2]), x1 = Math.max(x(t[3]), x0 + 2);
      const h = l === 0 ? Math.max(3, (RH - 6) / Math.max(lv.length, 1)) : RH - 6;
      const ty = l === 0 ? y + 3 + i * h : y + 3;
      const age = t[1] / maxFile, shade = Math.round(230 - 150 * age);
      s += '<rect class="t" x="' + x0 + '" y="' + ty + '" width="' + (x1 - x0) + '" height="' + h +
        '" fill="rgb(' + shade + ',' + shade + ',255)" data-t="' + t.join(",") + '"></rect>';
    });
  });
  svg.setAttribute("height", 20 + 7 * RH);
  svg.innerHTML = s;
  label.textContent = "edit " + n + " of " + (LSM.edits.length - 1) + " (" + LSM.edits[n].kind + ")";
}
svg.addEventListener("mousemove", ev => {
  const d = ev.target.getAttribute && ev.target.getAttribute("data-t");
  if (!d) return;
  const [l, f, lo, hi, size] = d.split(",").map(Number);
  info.textContent = "L" + l + " table " + String(f).padStart(6, "0") + ", " + size + " bytes, " + LSM.keys[lo] + " .. " + LSM.keys[hi];
});
slider.addEventListener("input", draw);
draw();
`
