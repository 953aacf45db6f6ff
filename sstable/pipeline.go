package sstable

import (
	"sync/atomic"
)

// The worker takes the data blocks in batches of pipelineBatch: handing it
// one 4 KiB block at a time, the wake-up of its thread for each (tens of
// microseconds) cost more than compressing the block, and the two goroutines
// ran in turn instead of at once. pipelineDepth batches may wait while the
// Writer builds the next: enough to ride out a slow write, few enough that
// Size's estimate stays close.
const (
	pipelineBatch = 16
	pipelineDepth = 2
)

// pipeline compresses and writes a Writer's data blocks on a goroutine of
// its own (WriterOptions.Parallel), in the order they were built, while the
// Writer's caller goes on adding keys. The worker is the only user of the
// Writer's output (w.w, w.offset, w.compressed) until drain returns; the
// block handles, needed by the index, are collected and added at Close.
type pipeline struct {
	jobs  chan [][]byte // batches of raw blocks, in table order
	free  chan []byte   // raw buffers back from the worker
	done  chan struct{} // closed when the worker has exited
	batch [][]byte      // the blocks not yet sent (caller)
	nbufs int           // raw buffers made so far (caller)
	// reported is the largest size Size has returned (caller).
	reported uint64

	// The caller's index separators, one per block sent, awaiting the
	// blocks' handles: seps holds them end to end, sepEnds their ends.
	seps    []byte
	sepEnds []int

	// Written by the worker, read by the caller once done is closed.
	handles  []BlockHandle
	dataSize uint64
	err      error

	failed  atomic.Bool   // err is set (read by the caller at each block)
	written atomic.Uint64 // the worker's offset, for Size
	queued  atomic.Int64  // raw bytes sent and not yet written, for Size
}

// maxPipelineBufs is the raw buffers a pipeline may hold: those of the
// batches waiting, of the one the worker is on, and of the one being filled.
const maxPipelineBufs = (pipelineDepth + 2) * pipelineBatch

// startPipeline starts the worker of a Writer with Parallel set.
func (w *Writer) startPipeline() {
	p := &pipeline{
		jobs:  make(chan [][]byte, pipelineDepth),
		free:  make(chan []byte, maxPipelineBufs),
		done:  make(chan struct{}),
		batch: make([][]byte, 0, pipelineBatch),
	}
	p.written.Store(w.offset)
	w.pipe = p
	go w.pipelineWorker(p)
}

func (w *Writer) pipelineWorker(p *pipeline) {
	defer close(p.done)
	for batch := range p.jobs {
		for _, raw := range batch {
			if p.err == nil {
				bh, err := w.writeBlock(raw, w.opts.Compression)
				if err != nil {
					p.err = err
					p.failed.Store(true)
				} else {
					p.handles = append(p.handles, bh)
					p.dataSize += bh.Length + blockTrailerLen
					p.written.Store(w.offset)
					if f := w.opts.DataBlockWritten; f != nil {
						f(bh.Offset, raw)
					}
				}
			}
			p.queued.Add(-int64(len(raw)))
			p.free <- raw[:0]
		}
	}
}

// sendDataBlock hands the finished data block to the worker (with the next
// batch), giving the block writer another buffer to fill. It returns the
// worker's error, if it has met one.
func (w *Writer) sendDataBlock() error {
	p := w.pipe
	if p.failed.Load() {
		return p.err
	}
	raw := w.data.finish()
	var next []byte
	select {
	case next = <-p.free:
	default:
		if p.nbufs < maxPipelineBufs {
			p.nbufs++
			next = make([]byte, 0, cap(raw))
		} else {
			next = <-p.free
		}
	}
	w.data.buf = next
	p.queued.Add(int64(len(raw)))
	p.batch = append(p.batch, raw)
	if len(p.batch) == pipelineBatch {
		p.sendBatch()
	}
	return nil
}

// sendBatch hands the blocks not yet sent to the worker.
func (p *pipeline) sendBatch() {
	if len(p.batch) > 0 {
		p.jobs <- p.batch
		p.batch = make([][]byte, 0, pipelineBatch)
	}
}

// addSeparator keeps the index separator of the block last sent.
func (p *pipeline) addSeparator(sep []byte) {
	p.seps = append(p.seps, sep...)
	p.sepEnds = append(p.sepEnds, len(p.seps))
}

// drain waits for the worker to write every block sent, then adds the
// blocks' index entries. The Writer's output is the caller's again.
func (w *Writer) drain() error {
	p := w.pipe
	if p == nil {
		return nil
	}
	w.pipe = nil
	p.sendBatch()
	close(p.jobs)
	<-p.done
	if p.err != nil {
		return p.err
	}
	w.props.DataSize += p.dataSize
	start := 0
	for i, end := range p.sepEnds {
		w.index.add(p.seps[start:end], p.handles[i].append(nil))
		start = end
	}
	return nil
}

// size is Size while the worker runs: the bytes written, plus those of the
// blocks waiting, uncompressed; never less than it said before, so that a
// caller cutting tables at a size sees it grow as keys are added.
func (p *pipeline) size() uint64 {
	p.reported = max(p.reported, p.written.Load()+uint64(max(p.queued.Load(), 0)))
	return p.reported
}
