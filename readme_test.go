package bloomkv_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeGoBlock returns the first ```go block of README.md.
func readmeGoBlock(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no ```go block")
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatal("README.md's first ```go block is not closed")
	}
	return block
}

// funcBody returns the text between the braces of the function named name
// in the Go source src.
func funcBody(t *testing.T, filename, src, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s: %v", filename, err)
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
			continue
		}
		from := fset.Position(fn.Body.Lbrace).Offset + 1
		to := fset.Position(fn.Body.Rbrace).Offset
		return src[from:to]
	}
	t.Fatalf("%s: no func %s", filename, name)
	return ""
}

// normalize joins the fields of s with single spaces, so that indentation
// and line breaks do not count.
func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestREADMEQuickStartIsExample checks that the body of main in the
// README's quick start is, statement for statement and comment for comment,
// the body of Example up to its "// Output:" lines, which go
// test runs and whose output it checks: the README's program cannot drift
// from code that works.
func TestREADMEQuickStartIsExample(t *testing.T) {
	block := readmeGoBlock(t)
	readmeBody := funcBody(t, "README.md", block, "main")
	examples, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	exampleBody := funcBody(t, "example_test.go", string(examples), "Example")
	// The Example ends with the output go test checks; a program has none.
	if i := strings.Index(exampleBody, "// Output:"); i >= 0 {
		exampleBody = exampleBody[:i]
	}
	if normalize(readmeBody) != normalize(exampleBody) {
		t.Errorf("README.md's quick start main differs from Example in example_test.go:\n--- README.md\n%s\n--- example_test.go\n%s", readmeBody, exampleBody)
	}
	if !strings.HasPrefix(strings.TrimSpace(block), "package main") {
		t.Errorf("README.md's quick start is not a whole program (package main first)")
	}
}

// TestREADMEQuickStartBuilds compiles the README's quick start as written,
// as a program of this module (through a build overlay: nothing is written
// to the tree).
func TestREADMEQuickStartBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(src, []byte(readmeGoBlock(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory that does not exist in the tree, inside the module.
	pkgDir := filepath.Join(wd, "internal", "readmequickstart")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkgDir, "main.go"): src}})
	overlayPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "build", "-overlay", overlayPath, "-o", filepath.Join(tmp, "quickstart"), "./internal/readmequickstart")
	cmd.Dir = wd
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's quick start does not build: %v\n%s", err, out)
	}
}

// generatedDocs are written by the benchmark (go run ./bench -markdown
// docs/benchmarks.md -png docs/benchmarks.png), so a fresh clone may lack
// them until it runs.
var generatedDocs = map[string]bool{
	"docs/benchmarks.md":  true,
	"docs/benchmarks.png": true,
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdFence   = regexp.MustCompile("^\\s*(```|~~~)")
)

// linesOutsideFences returns the lines of a Markdown text that lie outside
// fenced code blocks.
func linesOutsideFences(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if mdFence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			out = append(out, line)
		}
	}
	return out
}

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range linesOutsideFences(text) {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// linksOutsideCode returns the link targets of a Markdown file, leaving out
// fenced code blocks and inline code.
func linksOutsideCode(text string) []string {
	var links []string
	for _, line := range linesOutsideFences(text) {
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 { // the even parts are outside `code`
			for _, m := range mdLink.FindAllStringSubmatch(parts[i], -1) {
				links = append(links, m[1])
			}
		}
	}
	return links
}

// TestREADMELinks checks that every relative link in README.md, docs/*.md
// and tools/bloomkv/README.md names a file that exists and, with a
// #fragment, a heading of that file.
func TestREADMELinks(t *testing.T) {
	files := []string{"README.md", "tools/bloomkv/README.md"}
	docs, _ := filepath.Glob("docs/*.md")
	files = append(files, docs...)
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			if generatedDocs[file] && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, link := range linksOutsideCode(string(text)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.ToSlash(filepath.Join(filepath.Dir(file), target))
			}
			content, err := os.ReadFile(path)
			if err != nil {
				if fi, serr := os.Stat(path); serr == nil && fi.IsDir() && frag == "" {
					continue
				}
				if generatedDocs[path] && os.IsNotExist(err) && frag == "" {
					continue
				}
				t.Errorf("%s: link %q: %v", file, link, err)
				continue
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %q: a fragment of a file that is not Markdown", file, link)
				continue
			}
			if !anchors(string(content))[frag] {
				t.Errorf("%s: link %q: %s has no heading #%s", file, link, path, frag)
			}
		}
	}
}

// TestREADMEShape checks that the README stays a front page (at most 300
// lines) and holds the block the benchmark fills: one begin and one end
// marker, in that order.
func TestREADMEShape(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines; keep it to 300 and move detail to docs/", n)
	}
	begin := []byte("<!-- bench:headline:begin -->")
	end := []byte("<!-- bench:headline:end -->")
	if bytes.Count(readme, begin) != 1 || bytes.Count(readme, end) != 1 {
		t.Fatalf("README.md: want one %s and one %s", begin, end)
	}
	if bytes.Index(readme, begin) > bytes.Index(readme, end) {
		t.Fatalf("README.md: %s comes after %s", begin, end)
	}
}
