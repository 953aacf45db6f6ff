package pebblestore

// The store's OPTIONS files: finding the newest and parsing it.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// newestOptions returns the name of the highest-numbered OPTIONS file among
// names, or "".
func newestOptions(names []os.DirEntry) string {
	var best uint64
	name := ""
	for _, n := range names {
		if num, ok := strings.CutPrefix(n.Name(), "OPTIONS-"); ok {
			if v, err := strconv.ParseUint(num, 10, 64); err == nil && v >= best {
				best, name = v, n.Name()
			}
		}
	}
	return name
}

// OptionsFile returns the store's newest OPTIONS file parsed: its sections
// in order, each with its key=value lines in order.
func (s *Store) OptionsFile() ([]Section, error) {
	if s.Options == "" {
		return nil, fmt.Errorf("pebblestore: %s: no OPTIONS file", s.Dir)
	}
	name := filepath.Join(s.Dir, s.Options)
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return ParseOptions(name, data)
}

// Section is a section of an OPTIONS file: [Name] and its options.
type Section struct {
	Name    string
	Options [][2]string
}

// ParseOptions parses an OPTIONS file: [section] lines, key=value lines in
// them, blank lines and ; or # comments. Anything else is an error naming
// the line.
func ParseOptions(name string, data []byte) ([]Section, error) {
	var out []Section
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, ";") || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			out = append(out, Section{Name: line[1 : len(line)-1]})
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || len(out) == 0 {
				return nil, fmt.Errorf("pebblestore: %s: line %d is neither a [section] nor a key=value in one: %q", name, i+1, line)
			}
			sec := &out[len(out)-1]
			sec.Options = append(sec.Options, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return out, nil
}
