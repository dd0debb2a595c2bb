// Package checkpoint keeps the finished part of a long run on disk, so that
// a run stopped by a signal or killed can be continued: a file beside the
// run's output holding a header (the run's fingerprint and item range) and
// fixed-size records appended as batches finish. A record is written as
// soon as its batch finishes (a killed process loses nothing written) and
// synced to disk within SyncEvery (a crash of the machine loses at most
// that much), and on Close.
//
// The header is written to a temporary file renamed into place, so it is
// whole or absent. Each record ends with the CRC-32 of its payload: a
// record cut short or garbled by a kill in the middle of a write is
// detected on Resume, and it and whatever follows are discarded.
package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
)

// magic opens every checkpoint file.
const magic = "TAPELOOP-CHECKPOINT-1\n"

// maxHeader bounds the header's length read back.
const maxHeader = 1 << 16

// Header is what a checkpoint belongs to.
type Header struct {
	Workload    string `json:"workload"`
	Fingerprint string `json:"fingerprint"` // the run's inputs and parameters
	Lo          int    `json:"lo"`          // the run's items [Lo, Hi)
	Hi          int    `json:"hi"`
	Record      int    `json:"record"` // bytes of a record's payload
}

// ErrMismatch is wrapped by Resume's error for a checkpoint of another run.
var ErrMismatch = errors.New("the checkpoint is from a different run")

// SyncEvery is how long appended records may wait to be synced to disk.
const SyncEvery = time.Second

// Path is the checkpoint file of the output out.
func Path(out string) string { return out + ".ckpt" }

// File is an open checkpoint, appended to as batches finish.
type File struct {
	mu    sync.Mutex
	f     *os.File
	path  string
	rec   int
	count int // records on disk
	total int // records the whole run takes
	what  string
	// synced is when the file was last synced; dirty, whether records
	// were written since; timer, the sync to come.
	synced time.Time
	dirty  bool
	timer  *time.Timer
	buf    []byte // the records of the last Append with their CRCs, reused
}

// open holds the checkpoints open in this process, for CloseAll.
var open struct {
	sync.Mutex
	files map[*File]bool
}

// Create writes a checkpoint with header h and no records at path,
// replacing any there, and opens it. total is the number of records the
// finished run has; what names its items in messages.
func Create(path string, h Header, total int, what string) (*File, error) {
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(magic)
	binary.Write(&b, binary.LittleEndian, uint32(len(hb)))
	b.Write(hb)
	if err := atomicfile.WriteFile(path, b.Bytes()); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return openAppend(path, h.Record, 0, total, what)
}

// Count reads the header at path and returns how many records follow it,
// counting a torn last one; fs.ErrNotExist when there is no file.
func Count(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h, off, err := readHeader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return int((fi.Size() - off + int64(h.Record) + 3) / int64(h.Record+4)), nil
}

// Resume opens the checkpoint at path, checks that its header is want,
// and passes each whole record's payload, in the order written, to each
// (the slice is reused); a torn record at the end, and anything after it,
// is cut off. Records appended later follow them.
func Resume(path string, want Header, total int, what string, each func([]byte) error) (*File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no checkpoint at %s", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, off, err := readHeader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if h != want {
		return nil, fmt.Errorf("%s: %w (its inputs, flags or shard differ from this run's): remove it to start over", path, ErrMismatch)
	}
	n, err := readRecords(bufio.NewReaderSize(f, 1<<20), h.Record, each)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Truncate(path, off+int64(n)*int64(h.Record+4)); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return openAppend(path, h.Record, n, total, what)
}

func readHeader(r io.Reader) (h Header, off int64, err error) {
	bad := errors.New("not a tapeloop checkpoint")
	m := make([]byte, len(magic)+4)
	if _, err := io.ReadFull(r, m); err != nil || string(m[:len(magic)]) != magic {
		return h, 0, bad
	}
	n := binary.LittleEndian.Uint32(m[len(magic):])
	if n > maxHeader {
		return h, 0, bad
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(r, hb); err != nil {
		return h, 0, bad
	}
	if err := json.Unmarshal(hb, &h); err != nil || h.Record < 1 {
		return h, 0, bad
	}
	return h, int64(len(m)) + int64(n), nil
}

// readRecords passes the whole records after the header to each and
// returns their number; r is positioned after the header.
func readRecords(r io.Reader, size int, each func([]byte) error) (int, error) {
	b := make([]byte, size+4)
	for n := 0; ; n++ {
		if _, err := io.ReadFull(r, b); err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
		if crc32.ChecksumIEEE(b[:size]) != binary.LittleEndian.Uint32(b[size:]) {
			return n, nil
		}
		if err := each(b[:size]); err != nil {
			return n, err
		}
	}
}

func openAppend(path string, rec, count, total int, what string) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c := &File{f: f, path: path, rec: rec, count: count, total: total, what: what}
	open.Lock()
	defer open.Unlock()
	if open.files == nil {
		open.files = map[*File]bool{}
	}
	open.files[c] = true
	return c, nil
}

// Append writes records (each of the header's Record bytes), each with its
// CRC, and syncs the file when it was last synced SyncEvery ago.
func (c *File) Append(recs [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return errors.New("checkpoint: closed")
	}
	b := c.buf[:0] // kept between batches: a run's records are written without garbage
	for _, r := range recs {
		if len(r) != c.rec {
			panic("checkpoint: record of the wrong size")
		}
		b = append(b, r...)
		b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(r))
	}
	c.buf = b
	if _, err := c.f.Write(b); err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.path, err)
	}
	c.count += len(recs)
	c.dirty = true
	if wait := SyncEvery - time.Since(c.synced); wait > 0 {
		if c.timer == nil {
			c.timer = time.AfterFunc(wait, c.syncLater)
		}
		return nil
	}
	return c.sync()
}

// syncLater syncs records written within SyncEvery of the last sync.
func (c *File) syncLater() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if c.f != nil && c.dirty {
		c.sync() // an error shows on the next Append's or Close's sync
	}
}

func (c *File) sync() error {
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.path, err)
	}
	c.synced, c.dirty = time.Now(), false
	return nil
}

// Path is the checkpoint's file.
func (c *File) Path() string { return c.path }

// Saved is the number of records on disk.
func (c *File) Saved() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// Note says how much of the run is saved and how to continue it, or ""
// when nothing is.
func (c *File) Note() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.note()
}

func (c *File) note() string {
	if c.count == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d %s done, saved in %s: rerun the same command with --resume to continue", c.count, c.total, c.what, c.path)
}

// Close closes the checkpoint; one holding no records is removed, so that
// only a checkpoint with work in it outlives its run.
func (c *File) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.close()
}

func (c *File) close() error {
	if c.f == nil {
		return nil
	}
	open.Lock()
	delete(open.files, c)
	open.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	var err error
	if c.dirty {
		err = c.sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if c.count == 0 {
		os.Remove(c.path)
	}
	return err
}

// Remove closes and removes the checkpoint: its run's output is complete.
func (c *File) Remove() error {
	c.Close()
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// CloseAll closes every open checkpoint, waiting for a write in progress
// to end, and returns their notes, for a process stopped by a signal just
// before it exits.
func CloseAll() []string {
	open.Lock()
	files := make([]*File, 0, len(open.files))
	for c := range open.files {
		files = append(files, c)
	}
	open.Unlock()
	var notes []string
	for _, c := range files {
		c.mu.Lock()
		if n := c.note(); n != "" {
			notes = append(notes, n)
		}
		c.close()
		c.mu.Unlock()
	}
	return notes
}
