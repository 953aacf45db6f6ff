package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/internal/base"
)

// byteFormat prints keys or values: quoted (Go syntax), hex, size (the
// length) or null (nothing).
type byteFormat string

const (
	formatQuoted byteFormat = "quoted"
	formatHex    byteFormat = "hex"
	formatSize   byteFormat = "size"
	formatNull   byteFormat = "null"
)

// String and Set make a byteFormat a flag value.
func (f *byteFormat) String() string { return string(*f) }

// Set parses a format name.
func (f *byteFormat) Set(s string) error {
	switch byteFormat(s) {
	case formatQuoted, formatHex, formatSize, formatNull:
		*f = byteFormat(s)
		return nil
	}
	return fmt.Errorf("unknown format %q (quoted, hex, size or null)", s)
}

// Type names the flag's kind in --help.
func (f *byteFormat) Type() string { return "format" }

// format returns b in f ("" for null).
func (f byteFormat) format(b []byte) string {
	switch f {
	case formatHex:
		return hex.EncodeToString(b)
	case formatSize:
		return strconv.Itoa(len(b))
	case formatNull:
		return ""
	}
	return strconv.Quote(string(b))
}

// formats are the --key-format and --value-format flags of a command.
type formats struct {
	key, value byteFormat
	e          *env
}

func (fm *formats) register(c *cobra.Command, e *env, value byteFormat) {
	fm.key, fm.value, fm.e = formatQuoted, value, e
	c.Flags().Var(&fm.key, "key-format", "how to print keys: quoted, hex, size or null")
	c.Flags().Var(&fm.value, "value-format", "how to print values: quoted, hex, size or null")
}

// k formats a key and v a value. In JSON output a quoted string loses its
// surrounding quotes: the JSON string holds the Go-escaped bytes.
func (fm *formats) k(b []byte) string { return fm.bare(fm.key.format(b)) }
func (fm *formats) v(b []byte) string { return fm.bare(fm.value.format(b)) }

func (fm *formats) bare(s string) string {
	if fm.e != nil && fm.e.json && len(s) >= 2 && s[0] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// ikey formats an internal key: the user key in the key format, then its
// sequence number and kind.
func (fm *formats) ikey(k base.InternalKey) string {
	return fmt.Sprintf("%s#%d,%s", fm.k(k.UserKey), k.SeqNum(), k.Kind())
}

// quoteKey formats a user key as the text output shows bounds.
func quoteKey(k []byte) string { return strconv.Quote(string(k)) }

// parseKey reads a key given on the command line: literal, or hex after
// "hex:".
func parseKey(s string) ([]byte, error) {
	if h, ok := strings.CutPrefix(s, "hex:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, usageError{fmt.Errorf("key %q: bad hex: %v", s, err)}
		}
		return b, nil
	}
	return []byte(s), nil
}

// bounds are the --start, --end and --count flags of a scan.
type bounds struct {
	startArg, endArg string
	count            int
	start, end       []byte // nil when not given
}

func (b *bounds) register(c *cobra.Command) {
	c.Flags().StringVar(&b.startArg, "start", "", "first key to print (inclusive; hex:... for hex)")
	c.Flags().StringVar(&b.endArg, "end", "", "key to stop before (exclusive; hex:... for hex)")
	c.Flags().IntVar(&b.count, "count", 0, "print at most this many records (0: all)")
}

// parse reads the flags, reporting mistakes as usage errors.
func (b *bounds) parse(c *cobra.Command) error {
	var err error
	if c.Flags().Changed("start") {
		if b.start, err = parseKey(b.startArg); err != nil {
			return err
		}
	}
	if c.Flags().Changed("end") {
		if b.end, err = parseKey(b.endArg); err != nil {
			return err
		}
	}
	if b.count < 0 {
		return usageError{fmt.Errorf("--count %d is negative", b.count)}
	}
	return nil
}

// emit prints one JSON object on a line.
func (e *env) emit(v any) { e.emitTo(e.out, v) }

// emitReport prints a command's closing report as one JSON object on a
// line of stderr, apart from the records on stdout.
func (e *env) emitReport(v any) { e.emitTo(e.errOut, v) }

// emitTo prints one JSON object on a line of w.
func (e *env) emitTo(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		e.fail(fmt.Errorf("encoding JSON: %w", err))
	}
}

// printf prints text output.
func (e *env) printf(format string, args ...any) { fmt.Fprintf(e.out, format, args...) }

// reportf prints a line of a command's closing report on stderr, apart
// from the records on stdout.
func (e *env) reportf(format string, args ...any) { fmt.Fprintf(e.errOut, format, args...) }

// percent prints a fraction as a percentage.
func percent(f float64) string { return fmt.Sprintf("%.3f%%", 100*f) }

// plural counts n of a thing: "1 entry", "2 entries", "0 tables", "3
// matches".
func plural[N int | int64 | uint32 | uint64](n N, singular string) string {
	if n == 1 {
		return "1 " + singular
	}
	if s, ok := strings.CutSuffix(singular, "y"); ok && !strings.ContainsAny(s[len(s)-1:], "aeiou") {
		return fmt.Sprintf("%d %sies", n, s)
	}
	if strings.HasSuffix(singular, "ch") || strings.HasSuffix(singular, "sh") || strings.HasSuffix(singular, "s") || strings.HasSuffix(singular, "x") {
		return fmt.Sprintf("%d %ses", n, singular)
	}
	return fmt.Sprintf("%d %ss", n, singular)
}
