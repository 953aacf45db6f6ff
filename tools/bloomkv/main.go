// Command bloomkv inspects a store's files offline: sstables (bloomkv's, and
// those Pebble writes in the LevelDB, RocksDBv2 and Pebblev1 to v7 formats),
// write-ahead logs, manifests, blob files and whole stores, bloomkv's and
// Pebble's (with row-based tables). It also serves a store over HTTP and
// joins, estimates the overlap of, or diffs two stores (semijoin), each a
// directory or a served store's URL. It only reads (serve --writable opens
// the store as the application does, its logs replayed and flushed).
//
//	go run ./tools/bloomkv sstable properties FILE...
//	go run ./tools/bloomkv sstable layout [-v] FILE...
//	go run ./tools/bloomkv sstable scan|dump [--start K] [--end K] [--count N] FILE...
//	go run ./tools/bloomkv sstable check FILE...
//	go run ./tools/bloomkv sstable filter [--probes N] FILE...
//	go run ./tools/bloomkv sstable space [--start K] [--end K] FILE...
//	go run ./tools/bloomkv wal dump FILE
//	go run ./tools/bloomkv manifest dump|check FILE
//	go run ./tools/bloomkv manifest summarize [--edits N] FILE
//	go run ./tools/bloomkv blob dump|layout FILE...
//	go run ./tools/bloomkv db lsm|check|properties DIR
//	go run ./tools/bloomkv db space DIR [--start K] [--end K]
//	go run ./tools/bloomkv find DIR KEY
//	go run ./tools/bloomkv db get DIR KEY
//	go run ./tools/bloomkv db scan DIR [--start K] [--end K] [--count N]
//	go run ./tools/bloomkv db diff DIR [--sample N]
//	go run ./tools/bloomkv db options DIR
//	go run ./tools/bloomkv serve [--addr ADDR] [--writable] [--tls-cert F --tls-key F] [--client-ca F] [--token-file F] [--keys-only] DIR
//	go run ./tools/bloomkv join [--strategy S] [--semi] [--start K] [--end K] [--limit N] A B
//	go run ./tools/bloomkv estimate [--bits-per-key N] [--start K] [--end K] A B
//	go run ./tools/bloomkv diff [--seed N] [--start K] [--end K] A B
//
// join, estimate and diff take --ca, --cert, --key and --token-file for a
// served store that uses TLS or asks for a token. Every command takes
// --json for one JSON object per line instead of text.
// A file that cannot be read is reported in one line on stderr, naming the
// file (and the block and offset where known), and the exit status is 1;
// the other files of the command are still read. Usage mistakes exit with 2.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // a file could not be read, a check failed, a key is absent
	exitUsage = 2
)

// usageError marks a mistake in the command line.
type usageError struct{ error }

// env is what every command writes to.
type env struct {
	ctx         context.Context // cancelled to stop serve and abandon remote calls
	out, errOut io.Writer
	tty         bool // errOut is a terminal: long work shows its progress there
	json        bool
	failed      bool
	running     bool // a command's run began: its errors are failures, not usage
}

// fail reports err in one line on stderr and remembers that the command
// failed.
func (e *env) fail(err error) {
	e.failed = true
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	fmt.Fprintf(e.errOut, "bloomkv: %s\n", strings.TrimPrefix(msg, "bloomkv: "))
}

// run executes the command line argv and returns the exit status.
func run(argv []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), argv, stdout, stderr)
}

// runContext is run with a context whose cancellation stops serve and
// abandons a command's remote calls.
func runContext(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, out: stdout, errOut: stderr, tty: isTerminal(stderr)}
	root := &cobra.Command{
		Use:   "bloomkv",
		Short: "Inspect bloomkv stores and sstables offline, serve and compare stores (read-only)",
		Long: `bloomkv reads a store's files without the application: sstables
(bloomkv's, and Pebble's in the LevelDB, RocksDBv2 and Pebblev1 to v7
formats: row-based to v4, columnar from v5), write-ahead logs, manifests,
Pebble's blob files and whole stores, bloomkv's and Pebble's. It never
writes to them. Commands on a store take its directory first (db get DIR
KEY, find DIR KEY).

serve serves a store over HTTP or HTTPS (read-only unless --writable);
join, estimate and diff compare two stores, each a directory or the http://
or https:// URL of a served one, moving little data between them.

Keys given as arguments are taken literally, or as hex after "hex:"
(hex:00ff). With --json every command prints one JSON object per line.
A file that cannot be read is reported in one line on stderr and the exit
status is 1; a usage mistake exits with 2.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          args(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("bloomkv needs a command")}
		},
		PersistentPreRun: func(*cobra.Command, []string) { e.running = true },
	}
	root.PersistentFlags().BoolVar(&e.json, "json", false, "print one JSON object per line instead of text")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(argv)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(sstableCmd(e), walCmd(e), manifestCmd(e), dbCmd(e), findCmd(e), blobCmd(e), serveCmd(e), joinCmd(e), estimateCmd(e), diffCmd(e), nodeCmd(e))

	err := root.Execute()
	switch {
	case err == nil:
		if e.failed {
			return exitFail
		}
		return exitOK
	case isUsage(err, e.running):
		fmt.Fprintf(stderr, "bloomkv: %v (see --help)\n", err)
		return exitUsage
	default:
		e.fail(err)
		return exitFail
	}
}

// isUsage reports whether err is a command-line mistake: ours (bad flags,
// argument counts, key syntax), or one cobra raises before any command runs
// (an unknown command). Errors of a running command are failures.
func isUsage(err error, running bool) bool {
	var u usageError
	return errors.As(err, &u) || !running
}

// args returns cobra's check of a command's argument count, marked as a
// usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, a []string) error {
		if err := check(c, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// group returns a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("%s needs a subcommand", c.CommandPath())}
		},
	}
	c.AddCommand(subs...)
	return c
}

// dirThenKey checks the arguments of a command that takes DIR KEY: two,
// and not in the other order. A swap (the first not a directory, the
// second one) is a usage error that says which looked like which.
func dirThenKey(c *cobra.Command, a []string) error {
	if err := args(cobra.ExactArgs(2))(c, a); err != nil {
		return err
	}
	if isDir(a[0]) || !isDir(a[1]) {
		return nil
	}
	return usageError{fmt.Errorf("%s takes DIR KEY, the directory first: %q is a directory and %q is not (try: %s %s %s)",
		c.CommandPath(), a[1], a[0], c.CommandPath(), a[1], a[0])}
}

// isDir reports whether path names a directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
