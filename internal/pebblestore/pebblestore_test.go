package pebblestore

import (
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	secs, err := ParseOptions("OPTIONS-000003", []byte("[Version]\n  pebble_version=0.1\n\n; comment\n[Options]\n  comparer=leveldb.BytewiseComparator\n  a = b=c\n[Level \"0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 3 || secs[1].Name != "Options" || len(secs[1].Options) != 2 || secs[1].Options[1] != [2]string{"a", "b=c"} || secs[2].Name != `Level "0"` {
		t.Fatalf("%+v", secs)
	}
	for _, bad := range []string{"key=value before a section\n", "[Options]\nno equals sign\n"} {
		if _, err := ParseOptions("OPTIONS-000003", []byte(bad)); err == nil || !strings.Contains(err.Error(), "OPTIONS-000003: line ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseMarker(t *testing.T) {
	for _, c := range []struct {
		in    string
		iter  uint64
		value string
		ok    bool
	}{
		{"000001.MANIFEST-000001", 1, "MANIFEST-000001", true},
		{"000012.013", 12, "013", true},
		{"000001", 0, "", false},
		{"x.MANIFEST-000001", 0, "", false},
		{"000001.", 0, "", false},
	} {
		iter, value, err := parseMarker(c.in)
		if (err == nil) != c.ok || (c.ok && (iter != c.iter || value != c.value)) {
			t.Errorf("%q: %d %q %v", c.in, iter, value, err)
		}
	}
}

func FuzzParseOptions(f *testing.F) {
	f.Add([]byte("[Version]\n  pebble_version=0.1\n[Options]\n  comparer=leveldb.BytewiseComparator\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		secs, err := ParseOptions("OPTIONS", data)
		if err != nil {
			return
		}
		for _, s := range secs {
			for _, kv := range s.Options {
				if strings.Contains(kv[0], "=") {
					t.Fatalf("key %q holds the separator", kv[0])
				}
			}
		}
	})
}
