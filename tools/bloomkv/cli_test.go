package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOneLanguage: the commands on a store take its directory first, a
// swap is a usage error naming which argument looked like which; sstable
// dump is sstable scan; a server named without its scheme is refused with
// the URL to use; the help names the formats read.
func TestOneLanguage(t *testing.T) {
	f := newFixture(t)
	for _, cmd := range [][]string{{"find"}, {"db", "get"}} {
		out, _, code := runTool(append(cmd, f.db, "user000")...)
		if code != 0 || out == "" {
			t.Errorf("%v DIR KEY: exit %d", cmd, code)
		}
		_, errOut, code := runTool(append(cmd, "user000", f.db)...)
		want := `"` + f.db + `" is a directory and "user000" is not (try: bloomkv ` + strings.Join(cmd, " ") + " " + f.db + " user000)"
		if code != 2 || !strings.Contains(errOut, "takes DIR KEY, the directory first") || !strings.Contains(errOut, want) {
			t.Errorf("%v KEY DIR: exit %d, %q", cmd, code, errOut)
		}
	}
	scan, _, code := runTool("sstable", "scan", f.table)
	dump, _, code2 := runTool("sstable", "dump", f.table)
	if code != 0 || code2 != 0 || scan != dump || scan == "" {
		t.Errorf("sstable dump: exit %d, %d; same output as scan: %v", code, code2, scan == dump)
	}
	for _, arg := range []string{"localhost:8080", "127.0.0.1:9/x", "[::1]:7000"} {
		_, errOut, code := runTool("join", f.db, arg)
		if code != 2 || !strings.Contains(errOut, "a served store's URL starts with http:// or https:// (try http://"+arg+")") {
			t.Errorf("join with %s: exit %d, %q", arg, code, errOut)
		}
	}
	help, _, _ := runTool("--help")
	if !strings.Contains(help, "Pebblev1 to v7") || strings.Contains(help, "to v4\nformats)") {
		t.Errorf("help:\n%s", help)
	}
}

// TestStoppingServerRefusal: a served store that is stopping refuses as
// the semijoin server it is, and the client passes on its reason.
func TestStoppingServerRefusal(t *testing.T) {
	g := newGate()
	g.closed = true
	srv := httptest.NewServer(g.wrap(http.NotFoundHandler()))
	defer srv.Close()
	_, errOut, code := runTool("estimate", srv.URL, srv.URL)
	if code != 1 || !strings.Contains(errOut, "HTTP 503: bloomkv: the server is stopping") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}
