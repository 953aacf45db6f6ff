package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// payload returns n bytes, compressible (repetitive text) or not (random).
func payload(rng *rand.Rand, n int, compressible bool) []byte {
	p := make([]byte, n)
	if compressible {
		const text = "key-000123 value of some length, "
		for i := range p {
			p[i] = text[i%len(text)]
		}
		return p
	}
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// encode writes p through a Writer in randomly sized pieces.
func encode(t testing.TB, rng *rand.Rand, p []byte, opts ...Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts...)
	for rest := p; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(3*DefaultSize/2))
		if rng.IntN(4) == 0 {
			n = min(len(rest), 1+rng.IntN(10))
		}
		if m, err := w.Write(rest[:n]); err != nil || m != n {
			t.Fatalf("Write: %d, %v", m, err)
		}
		rest = rest[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{DefaultSize, 100} {
		for _, n := range []int{0, 1, size - 1, size, size + 1, 2*size - 1, 3*size + 7, 10*size + 3, rng.IntN(5 * size)} {
			for _, compressible := range []bool{true, false} {
				name := fmt.Sprintf("size=%d/n=%d/compressible=%v", size, n, compressible)
				p := payload(rng, n, compressible)
				stream := encode(t, rng, p, WithSize(size))
				frames := (n + size - 1) / size
				if frames > 0 && !compressible && len(stream) != n+headerLen*(frames+1)+endLen {
					t.Errorf("%s: incompressible payload took %d bytes, want %d stored raw", name, len(stream), n+headerLen*(frames+1)+endLen)
				}
				if compressible && size == DefaultSize && n > 1000 && len(stream) > n/4 {
					t.Errorf("%s: compressible payload took %d bytes", name, len(stream))
				}
				readers := map[string]io.Reader{
					"plain":   bytes.NewReader(stream),
					"onebyte": iotest.OneByteReader(bytes.NewReader(stream)),
					"half":    iotest.HalfReader(bytes.NewReader(stream)),
					"dataerr": iotest.DataErrReader(bytes.NewReader(stream)),
				}
				for rname, r := range readers {
					got, err := io.ReadAll(NewReader(r, size))
					if err != nil || !bytes.Equal(got, p) {
						t.Fatalf("%s/%s: read %d bytes, %v; want %d bytes", name, rname, len(got), err, n)
					}
				}
				if err := iotest.TestReader(NewReader(bytes.NewReader(stream), size), p); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if size == DefaultSize {
					if msg := AppendMessage([]byte("x"), p); !bytes.Equal(msg[1:], stream) {
						t.Fatalf("%s: AppendMessage differs from Writer", name)
					}
					got, err := ReadMessage(bytes.NewReader(stream), max(n, 1))
					if err != nil || !bytes.Equal(got, p) {
						t.Fatalf("%s: ReadMessage: %d bytes, %v", name, len(got), err)
					}
				}
			}
		}
	}
}

func TestReadMessageEmpty(t *testing.T) {
	got, err := ReadMessage(bytes.NewReader(AppendMessage(nil, nil)), 10)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("got %q, %v; want an empty non-nil slice", got, err)
	}
}

// smallStream is a stream of several frames, compressed and raw.
func smallStream() (stream, p []byte) {
	rng := rand.New(rand.NewPCG(3, 4))
	p = append(bytes.Repeat([]byte("ab"), 20), payload(rng, 30, false)...)
	var buf bytes.Buffer
	w := NewWriter(&buf, WithSize(32))
	w.Write(p[:10])
	w.Flush()
	w.Write(p[10:])
	w.Close()
	return buf.Bytes(), p
}

func TestSmallStreamShape(t *testing.T) {
	stream, _ := smallStream()
	types := map[byte]int{}
	for off := 0; off < len(stream); {
		types[stream[off]]++
		off += headerLen + int(binary.LittleEndian.Uint32(stream[off+1:]))
	}
	if types[typeData] == 0 || types[typeData|flagSnappy] == 0 || types[typeEnd] != 1 {
		t.Fatalf("frame types %v: want raw and compressed data frames and one end frame", types)
	}
}

func TestTruncation(t *testing.T) {
	stream, p := smallStream()
	for cut := range len(stream) {
		got, err := io.ReadAll(NewReader(bytes.NewReader(stream[:cut]), 64))
		if !errors.Is(err, ErrTruncated) || errors.Is(err, io.EOF) {
			t.Fatalf("cut at %d of %d: %v, want ErrTruncated", cut, len(stream), err)
		}
		if !bytes.HasPrefix(p, got) {
			t.Fatalf("cut at %d: returned data that isn't a prefix of the payload", cut)
		}
		if _, err := ReadMessage(bytes.NewReader(stream[:cut]), 1000); !errors.Is(err, ErrTruncated) {
			t.Fatalf("ReadMessage, cut at %d: %v, want ErrTruncated", cut, err)
		}
	}
}

func TestBitFlips(t *testing.T) {
	stream, p := smallStream()
	accepted := 0
	for bit := range 8 * len(stream) {
		damaged := bytes.Clone(stream)
		damaged[bit/8] ^= 1 << (bit % 8)
		got, err := io.ReadAll(NewReader(bytes.NewReader(damaged), 64))
		if err == nil {
			if !bytes.Equal(got, p) {
				t.Fatalf("bit %d flipped: different data returned as complete", bit)
			}
			accepted++
			continue
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("bit %d flipped: %v, not one of the package's errors", bit, err)
		}
	}
	t.Logf("%d of %d bit flips gave the same data", accepted, 8*len(stream))
	// A flip inside Snappy data can yield the same output (a copy from an
	// equal earlier run); anything else must fail.
	if accepted > 2 {
		t.Errorf("%d of %d bit flips went unnoticed", accepted, 8*len(stream))
	}
}

func TestDroppedFrame(t *testing.T) {
	stream, _ := smallStream()
	first := headerLen + int(binary.LittleEndian.Uint32(stream[1:]))
	second := first + headerLen + int(binary.LittleEndian.Uint32(stream[first+1:]))
	for name, s := range map[string][]byte{
		"first":  stream[first:],
		"second": append(bytes.Clone(stream[:first]), stream[second:]...),
	} {
		_, err := io.ReadAll(NewReader(bytes.NewReader(s), 64))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "end frame counts") {
			t.Errorf("%s frame dropped: %v, want a totals mismatch", name, err)
		}
	}
}

func TestTrailingData(t *testing.T) {
	stream := append(AppendMessage(nil, []byte("hello")), 0)
	_, err := io.ReadAll(NewReader(bytes.NewReader(stream), 0))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v, want ErrCorrupt", err)
	}
	want := fmt.Sprintf("at offset %d", len(stream)-1)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%q does not say %q", err, want)
	}
}

func TestCorruptMessages(t *testing.T) {
	good := AppendMessage(nil, []byte("hello, hello, hello, hello"))
	frame := func(typ byte, body []byte) []byte {
		h := make([]byte, headerLen, headerLen+len(body))
		putHeader(h, typ, len(body), checksum(body))
		return append(h, body...)
	}
	end := appendEnd(nil, 0, 0)
	cases := []struct {
		name   string
		stream []byte
		want   error
		says   string
	}{
		{"checksum", append([]byte{good[0], good[1], good[2], good[3], good[4], good[5] ^ 1}, good[6:]...), ErrCorrupt, "frame at offset 0: checksum mismatch"},
		{"type", append(frame(0x03, []byte("x")), end...), ErrCorrupt, "unknown frame type"},
		{"zero type", make([]byte, 100), ErrCorrupt, "unknown frame type"},
		{"compressed end", frame(typeEnd|flagSnappy, end[headerLen:]), ErrCorrupt, "unknown frame type"},
		{"empty data", append(frame(typeData, nil), end...), ErrCorrupt, "empty data frame"},
		{"short end", frame(typeEnd, make([]byte, 8)), ErrCorrupt, "end frame of 8 bytes"},
		{"bad snappy", append(frame(typeData|flagSnappy, []byte{0xff}), end...), ErrCorrupt, "bad Snappy header"},
		{"snappy data", append(frame(typeData|flagSnappy, []byte{5, 0xff}), end...), ErrCorrupt, "bad Snappy data"},
		{"totals", append(frame(typeData, []byte("abc")), end...), ErrCorrupt, "end frame counts 0 bytes in 0 frames, the stream had 3 in 1"},
		{"offset", append(append(frame(typeData, []byte("abc")), frame(9, []byte("abc"))...), end...), ErrCorrupt, "frame at offset 12: unknown"},
		{"empty", nil, ErrTruncated, "stream ends at offset 0 without an end frame"},
		{"header cut", good[:5], ErrTruncated, "frame at offset 0: header cut after 5 of 9 bytes"},
	}
	for _, c := range cases {
		_, err := io.ReadAll(NewReader(bytes.NewReader(c.stream), 0))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
		if strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("%s: error %q is not one line", c.name, err)
		}
	}
}

// endless supplies bytes forever.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

func TestHugeFrame(t *testing.T) {
	raw := make([]byte, headerLen)
	putHeader(raw, typeData, 0xffffffff, 0)
	// A Snappy block that claims 1 GiB of output in a few stored bytes.
	body := binary.AppendUvarint(nil, 1<<30)
	body = append(body, 0, 0, 0)
	compressed := make([]byte, headerLen)
	putHeader(compressed, typeData|flagSnappy, len(body), 0)
	compressed = append(compressed, body...)

	for name, head := range map[string][]byte{"stored": raw, "decoded": compressed} {
		src := &endless{}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		n, err := NewReader(io.MultiReader(bytes.NewReader(head), src), 4096).Read(make([]byte, 10))
		runtime.ReadMemStats(&after)
		if n != 0 || !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: %d, %v; want ErrTooLarge", name, n, err)
		}
		if src.n != 0 {
			t.Errorf("%s: read %d bytes past the header", name, src.n)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
			t.Errorf("%s: allocated %d bytes", name, alloc)
		}
	}
}

func TestFrameLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, compressible := range []bool{true, false} {
		stream := encode(t, rng, payload(rng, 1000, compressible), WithSize(1000))
		if _, err := io.ReadAll(NewReader(bytes.NewReader(stream), 999)); !errors.Is(err, ErrTooLarge) {
			t.Errorf("compressible=%v: %v, want ErrTooLarge", compressible, err)
		}
		if _, err := io.ReadAll(NewReader(bytes.NewReader(stream), 1000)); err != nil {
			t.Errorf("compressible=%v: %v at the limit", compressible, err)
		}
	}
}

func TestReadMessageTooLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	p := payload(rng, 3*DefaultSize+5, true)
	msg := AppendMessage(nil, p)
	if _, err := ReadMessage(bytes.NewReader(msg), len(p)-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v, want ErrTooLarge", err)
	}
	if got, err := ReadMessage(bytes.NewReader(msg), len(p)); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("at the limit: %d bytes, %v", len(got), err)
	}
	small := AppendMessage(nil, []byte("0123456789"))
	if _, err := ReadMessage(bytes.NewReader(small), 9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v, want ErrTooLarge", err)
	}
}

type failReader struct {
	r   io.Reader
	err error
}

func (f *failReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = f.err
	}
	return n, err
}

func TestUnderlyingError(t *testing.T) {
	stream, _ := smallStream()
	lost := errors.New("connection reset")
	for _, cut := range []int{0, 5, 20, len(stream) - 1, len(stream)} {
		_, err := io.ReadAll(NewReader(&failReader{bytes.NewReader(stream[:cut]), lost}, 64))
		if !errors.Is(err, lost) || errors.Is(err, ErrTruncated) {
			t.Errorf("cut at %d: %v, want the underlying error", cut, err)
		}
	}
	// io.ErrUnexpectedEOF from below (as net/http reports a cut body) is
	// a truncation, and does not pass for io.EOF.
	_, err := io.ReadAll(NewReader(&failReader{bytes.NewReader(stream[:20]), io.ErrUnexpectedEOF}, 64))
	if !errors.Is(err, ErrTruncated) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("%v, want ErrTruncated", err)
	}
}

func TestStickyErrors(t *testing.T) {
	stream, _ := smallStream()
	r := NewReader(bytes.NewReader(stream[:len(stream)-1]), 64)
	_, err1 := io.ReadAll(r)
	_, err2 := r.Read(make([]byte, 1))
	if err1 == nil || err1 != err2 {
		t.Fatalf("%v then %v", err1, err2)
	}
	r = NewReader(bytes.NewReader(stream), 64)
	io.ReadAll(r)
	if _, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the end: %v", err)
	}
}

// flushRecorder records writes and flushes.
type flushRecorder struct {
	bytes.Buffer
	flushes []int // length written at each flush
}

func (f *flushRecorder) Flush() { f.flushes = append(f.flushes, f.Len()) }

type errFlusher struct {
	bytes.Buffer
	err error
}

func (f *errFlusher) Flush() error { return f.err }

func TestFlush(t *testing.T) {
	var rec flushRecorder
	w := NewWriter(&rec)
	w.Write([]byte("abc"))
	if rec.Len() != 0 {
		t.Fatalf("Write emitted %d bytes before a frame filled", rec.Len())
	}
	w.Flush()
	if rec.Len() == 0 || len(rec.flushes) != 1 || rec.flushes[0] != rec.Len() {
		t.Fatalf("after Flush: %d bytes, flushes %v", rec.Len(), rec.flushes)
	}
	w.Flush() // nothing buffered: no empty frame
	if len(rec.flushes) != 2 || rec.flushes[1] != rec.flushes[0] {
		t.Fatalf("second Flush: flushes %v", rec.flushes)
	}
	w.Close()
	if len(rec.flushes) != 3 || rec.flushes[2] != rec.Len() {
		t.Fatalf("Close: flushes %v, length %d", rec.flushes, rec.Len())
	}
	if got, err := ReadMessage(&rec.Buffer, 0); err != nil || string(got) != "abc" {
		t.Fatalf("%q, %v", got, err)
	}

	boom := errors.New("boom")
	ef := &errFlusher{err: boom}
	w = NewWriter(ef)
	if err := w.Flush(); err != boom {
		t.Fatalf("Flush() error not used: %v", err)
	}
	calls := 0
	w = NewWriter(ef, WithFlush(func() error { calls++; return nil }))
	if err := w.Flush(); err != nil || calls != 1 {
		t.Fatalf("WithFlush: %v, %d calls", err, calls)
	}
	w = NewWriter(ef, WithFlush(nil))
	if err := w.Close(); err != nil {
		t.Fatalf("WithFlush(nil): %v", err)
	}
}

type limitedWriter struct {
	n   int
	err error
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		n := l.n
		l.n = 0
		return n, l.err
	}
	l.n -= len(p)
	return len(p), nil
}

func TestWriterErrors(t *testing.T) {
	boom := errors.New("boom")
	w := NewWriter(&limitedWriter{n: 20, err: boom}, WithSize(10))
	if _, err := w.Write(make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Write(make([]byte, 100))
	if err != boom {
		t.Fatalf("%v, want boom", err)
	}
	if _, err := w.Write([]byte("x")); err != boom {
		t.Fatalf("after a failure: %v", err)
	}
	if err := w.Close(); err != boom {
		t.Fatalf("Close after a failure: %v", err)
	}

	w = NewWriter(&limitedWriter{n: 5})
	w.Write([]byte("x"))
	if err := w.Flush(); err != io.ErrShortWrite {
		t.Fatalf("%v, want io.ErrShortWrite", err)
	}

	var buf bytes.Buffer
	w = NewWriter(&buf)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if !bytes.Equal(buf.Bytes(), AppendMessage(nil, nil)) {
		t.Fatalf("empty stream %x", buf.Bytes())
	}
}

func TestOptions(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, DefaultSize}, {-1, DefaultSize}, {1, 1}, {MaxSize + 1, MaxSize}} {
		if got := NewWriter(io.Discard, WithSize(c.in)).size; got != c.want {
			t.Errorf("WithSize(%d): %d, want %d", c.in, got, c.want)
		}
	}
}

// TestStreaming checks that a flushed frame reaches the reader while the
// writer is still writing.
func TestStreaming(t *testing.T) {
	pr, pw := io.Pipe()
	got := make(chan []byte)
	go func() {
		w := NewWriter(pw)
		w.Write([]byte("first"))
		w.Flush()
		second := <-got // the reader has the first frame
		w.Write(second)
		w.Close()
		pw.Close()
	}()
	r := NewReader(pr, 0)
	buf := make([]byte, 100)
	read := make(chan int)
	go func() {
		n, _ := r.Read(buf)
		read <- n
	}()
	select {
	case n := <-read:
		if string(buf[:n]) != "first" {
			t.Fatalf("first read %q", buf[:n])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first frame did not arrive before the second was written")
	}
	got <- []byte("second")
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "second" {
		t.Fatalf("%q, %v", rest, err)
	}
}

func TestWriterAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p := payload(rng, 3*DefaultSize+100, true)
	w := NewWriter(io.Discard)
	w.Write(p) // grow the buffers
	w.Flush()
	if allocs := testing.AllocsPerRun(20, func() {
		w.Write(p[:100])
		w.Write(p)
		w.Flush()
	}); allocs != 0 {
		t.Errorf("%v allocations per run", allocs)
	}
	r := NewReader(bytes.NewReader(nil), 0)
	stream := encode(t, rng, p)
	buf := make([]byte, 4096)
	if allocs := testing.AllocsPerRun(20, func() {
		*r = Reader{r: bytes.NewReader(stream), max: DefaultSize, stored: r.stored, dec: r.dec}
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}); allocs > 1 { // the bytes.Reader
		t.Errorf("reader: %v allocations per run", allocs)
	}
}

// TestStatedLengthNotAllocated: a frame that states a length within the
// limit but sends little of it costs memory for what it sent, not for what
// it stated; and a Snappy frame that states more output than its stored
// bytes can encode is refused before the output is allocated.
func TestStatedLengthNotAllocated(t *testing.T) {
	const limit = 64 << 20
	head := make([]byte, headerLen)
	putHeader(head, typeData, limit, 0)
	body := binary.AppendUvarint(nil, limit)
	body = append(body, make([]byte, 100)...)
	snappyHead := make([]byte, headerLen)
	putHeader(snappyHead, typeData|flagSnappy, len(body), 0)
	for name, c := range map[string]struct {
		stream []byte
		want   error
	}{
		"stated, 1000 bytes sent": {append(head, make([]byte, 1000)...), ErrTruncated},
		"snappy, 64 MiB from 104": {append(snappyHead, body...), ErrCorrupt},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadMessage(bytes.NewReader(c.stream), limit)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes", name, alloc)
		}
	}
	// A frame larger than the first growth steps, sent whole, reads back.
	rng := rand.New(rand.NewPCG(9, 10))
	p := payload(rng, 300_000, false)
	stream := encode(t, rng, p, WithSize(1<<20))
	for _, r := range []io.Reader{bytes.NewReader(stream), iotest.HalfReader(bytes.NewReader(stream))} {
		if got, err := io.ReadAll(NewReader(r, 1<<20)); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("a frame of %d bytes: %d bytes back, %v", len(p), len(got), err)
		}
	}
}
