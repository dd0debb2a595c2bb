// Package checkpoint keeps the finished part of a long run on disk, so that
// a run stopped by a signal or killed can be continued: a file beside the
// run's output holding a header (the run's fingerprint and item range) and
// fixed-size records appended as items finish. A record is written as
// soon as its batch finishes (a killed process loses nothing written) and
// synced to disk within SyncEvery (a crash of the machine loses at most
// that much), and on Close.
//
// Each record names the item it holds (a DRR pose, a wavelet combination)
// and ends with a CRC-32C of that item number and the payload, seeded with
// the CRC of the header: a record cut short or garbled by a kill in the
// middle of a write, or copied from another run's checkpoint, fails its
// check and is skipped on Resume, and a second record of the same item is
// skipped too. So a record is only ever applied to its own item of its
// own run.
//
// The header is written to a temporary file renamed into place, so it is
// whole or absent. A run holds its checkpoint's lock (Lock) while it
// writes it, so that a second run on the same output is refused at once.
package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
)

// magic opens every checkpoint file; oldMagic opened those of earlier
// releases, whose records did not name their items.
const (
	magic    = "TAPELOOP-CHECKPOINT-2\n"
	oldMagic = "TAPELOOP-CHECKPOINT-1\n"
)

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

// OtherShard reports whether h is the checkpoint of another shard of
// run's run: the same inputs and parameters, other items.
func (h Header) OtherShard(run Header) bool {
	return h.Workload == run.Workload && h.Fingerprint == run.Fingerprint && h.Record == run.Record && (h.Lo != run.Lo || h.Hi != run.Hi)
}

// OtherShardAdvice says, for a checkpoint h of another shard than run's
// (OtherShard), whose work it is and how to keep it: removing it would
// lose that shard's finished work and compute this one into the other's
// file.
func (h Header) OtherShardAdvice(run Header) string {
	return fmt.Sprintf("it holds items [%d, %d) of this run, another shard's than this one's [%d, %d): keep it for that shard and give each shard its own --out (under a SLURM array the task number is the shard: resubmit failed tasks with their own numbers, e.g. sbatch --array=3,7, and the same --shards)",
		h.Lo, h.Hi, run.Lo, run.Hi)
}

// frame is the bytes of a record on disk: its item, its payload, its CRC.
func (h Header) frame() int { return 8 + h.Record + 4 }

// FrameBytes is the size on disk of one record of payload bytes.
func FrameBytes(payload int) int64 { return 8 + int64(payload) + 4 }

// ErrMismatch is wrapped by Scan's error for a checkpoint of another run,
// ErrOtherShard by its error for one of another shard of the same run.
var (
	ErrMismatch   = errors.New("the checkpoint is from a different run")
	ErrOtherShard = errors.New("the checkpoint is another shard's")
)

// SyncEvery is how long appended records may wait to be synced to disk.
const SyncEvery = time.Second

// Path is the checkpoint file of the output out.
func Path(out string) string { return out + ".ckpt" }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// File is an open checkpoint, appended to as batches finish.
type File struct {
	mu    sync.Mutex
	f     *os.File
	path  string
	rec   int
	key   uint32 // the header's CRC, which seeds every record's
	count int    // records on disk
	total int    // records the whole run takes
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
	// closed: CloseAll ran, and the process is ending; no checkpoint is
	// opened after it.
	closed bool
}

// encodeHeader is the checkpoint's bytes before its first record, and the
// key that seeds its records' CRCs.
func encodeHeader(h Header) ([]byte, uint32, error) {
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, 0, err
	}
	b := append([]byte(magic), binary.LittleEndian.AppendUint32(nil, uint32(len(hb)))...)
	return append(b, hb...), crc32.Checksum(hb, castagnoli), nil
}

// Create writes a checkpoint with header h and no records at path,
// replacing any there, and opens it. total is the number of records the
// finished run has; what names its items in messages.
func Create(path string, h Header, total int, what string) (*File, error) {
	b, key, err := encodeHeader(h)
	if err != nil {
		return nil, err
	}
	f, err := atomicfile.CreateHere(path) // a link at path is replaced, not followed
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Abort()
	if _, err := f.Write(b); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := f.Commit(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return openAppend(path, h.Record, key, 0, total, what)
}

// Count reads the checkpoint at path and returns how many items its whole
// records hold (each item once); fs.ErrNotExist when there is no file.
func Count(path string) (int, error) {
	_, n, err := Inspect(path)
	return n, err
}

// Inspect is Count, and the checkpoint's header: which run it belongs to.
func Inspect(path string) (Header, int, error) {
	f, err := openRegular(path)
	if err != nil {
		return Header{}, 0, err
	}
	defer f.Close()
	h, off, key, err := readHeader(f)
	if err != nil {
		return Header{}, 0, fmt.Errorf("%s: %w", path, err)
	}
	sc, err := scan(f, off, h, key, -1)
	if err != nil {
		return h, 0, fmt.Errorf("%s: %w", path, err)
	}
	return h, len(sc.order), nil
}

// Saved is a checkpoint read back by Scan, ready to be restored.
type Saved struct {
	path   string
	h      Header
	key    uint32
	items  []int   // the items to restore, in the order to restore them
	at     []int64 // their records' offsets
	end    int64   // where the file is cut when it is kept as it is
	clean  bool    // the file holds just these records, in this order, up to end
	Unused int     // whole records not restored: garbled, another run's, repeated, or past a gap
}

// Scan reads the checkpoint at path, checks that its header is want's and
// finds the records to restore: those of items in [0, items), each item's
// first, in the order written; with prefix, only those of items 0…p−1 (p
// the first item missing), in item order, for a run whose outputs are
// written in item order.
func Scan(path string, want Header, items int, prefix bool) (*Saved, error) {
	f, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no checkpoint at %s", path)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	h, off, key, err := readHeader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if h.OtherShard(want) {
		return nil, fmt.Errorf("%s: %w: %s", path, ErrOtherShard, h.OtherShardAdvice(want))
	}
	if h != want {
		return nil, fmt.Errorf("%s: %w (its inputs, flags or shard differ from this run's): remove it to start over", path, ErrMismatch)
	}
	sc, err := scan(f, off, h, key, items)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &Saved{path: path, h: h, key: key, Unused: sc.frames - len(sc.order)}
	if !prefix {
		s.items = sc.order
		s.clean = sc.frames == len(sc.order) && sc.bad == 0
	} else {
		for p := 0; p < items; p++ {
			if _, ok := sc.at[p]; !ok {
				break
			}
			s.items = append(s.items, p)
		}
		s.Unused = sc.frames - len(s.items)
		// Clean: the file's valid records are exactly 0…p−1 in order,
		// nothing garbled among them.
		s.clean = sc.bad == 0 && sc.frames == len(s.items) && slices.Equal(sc.order, s.items)
	}
	s.at = make([]int64, len(s.items))
	for k, i := range s.items {
		s.at[k] = sc.at[i]
	}
	s.end = off + int64(len(s.items))*int64(h.frame())
	if !s.clean {
		s.end = -1
	}
	return s, nil
}

// Len is the number of items Restore restores.
func (s *Saved) Len() int { return len(s.items) }

// Restore passes each record Scan found to each, with its item, and opens
// the checkpoint for appending after them (the slice is reused). A
// checkpoint holding anything else (a torn or garbled record, one of
// another run, a repeated item) is first rewritten with just these
// records, so that it holds each item once, in order.
func (s *Saved) Restore(total int, what string, each func(item int, payload []byte) error) (*File, error) {
	f, err := openRegular(s.path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	var out *atomicfile.File
	if !s.clean {
		if out, err = atomicfile.CreateHere(s.path); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		defer out.Abort()
		hb, _, err := encodeHeader(s.h)
		if err != nil {
			return nil, err
		}
		if _, err := out.Write(hb); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	frame := make([]byte, s.h.frame())
	for k, i := range s.items {
		if _, err := f.ReadAt(frame, s.at[k]); err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, err)
		}
		if err := each(i, frame[8:8+s.h.Record]); err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, err)
		}
		if out != nil {
			if _, err := out.Write(frame); err != nil {
				return nil, fmt.Errorf("checkpoint: %w", err)
			}
		}
	}
	if out != nil {
		if err := out.Commit(); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	} else if err := truncate(s.path, s.end); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return openAppend(s.path, s.h.Record, s.key, len(s.items), total, what)
}

// truncate cuts the checkpoint at path to size bytes, never through a
// symbolic link.
func truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s %w", path, ErrSymlink)
	}
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// openRegular opens the checkpoint at path for reading; something else
// than a regular file there (a FIFO that would block, a device) is refused,
// and a symbolic link is not followed.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s %w", path, ErrSymlink)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file: not a tapeloop checkpoint", path)
	}
	return f, nil
}

func readHeader(r io.Reader) (h Header, off int64, key uint32, err error) {
	bad := errors.New("not a tapeloop checkpoint")
	m := make([]byte, len(magic)+4)
	if _, err := io.ReadFull(r, m); err != nil {
		return h, 0, 0, bad
	}
	switch string(m[:len(magic)]) {
	case magic:
	case oldMagic:
		return h, 0, 0, errors.New("written by an earlier release of tapeloop, whose checkpoints this one cannot continue: remove it to start over")
	default:
		return h, 0, 0, bad
	}
	n := binary.LittleEndian.Uint32(m[len(magic):])
	if n > maxHeader {
		return h, 0, 0, bad
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(r, hb); err != nil {
		return h, 0, 0, bad
	}
	if err := json.Unmarshal(hb, &h); err != nil || h.Record < 1 || h.Record > 1<<40 {
		return h, 0, 0, bad
	}
	return h, int64(len(m)) + int64(n), crc32.Checksum(hb, castagnoli), nil
}

// scanned is what scan found: the first record of each item (its offset),
// the items in the order of those records, the whole records read and
// how many of them failed their check.
type scanned struct {
	at     map[int]int64
	order  []int
	frames int
	bad    int
}

// scan reads the whole records after the header, from off; items < 0
// takes any item number. Holes in a sparse file (all zeros: no record
// there is whole) are skipped without reading them.
func scan(f *os.File, off int64, h Header, key uint32, items int) (*scanned, error) {
	sc := &scanned{at: map[int]int64{}}
	fs := int64(h.frame())
	chunk := max(fs, (1<<20)/fs*fs)
	buf := make([]byte, chunk)
	for {
		// Skip whole records inside a hole; stop where no data follows.
		if d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA); err == nil && d > off {
			off += (d - off) / fs * fs
		} else if errors.Is(err, unix.ENXIO) {
			return sc, nil
		}
		n, err := f.ReadAt(buf, off)
		whole := int64(n) / fs * fs
		for p := int64(0); p < whole; p += fs {
			b := buf[p : p+fs]
			sc.frames++
			item := binary.LittleEndian.Uint64(b)
			crc := crc32.Update(key, castagnoli, b[:fs-4])
			if crc != binary.LittleEndian.Uint32(b[fs-4:]) || item > 1<<62 || (items >= 0 && int(item) >= items) {
				sc.bad++
				continue
			}
			if _, dup := sc.at[int(item)]; dup {
				continue
			}
			sc.at[int(item)] = off + p
			sc.order = append(sc.order, int(item))
		}
		off += whole
		if err == io.EOF || int64(n) < chunk {
			return sc, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func openAppend(path string, rec int, key uint32, count, total int, what string) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("checkpoint: %s %w", path, ErrSymlink)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c := &File{f: f, path: path, rec: rec, key: key, count: count, total: total, what: what}
	open.Lock()
	defer open.Unlock()
	if open.closed { // a checkpoint made as the process stops: nothing in it yet
		f.Close()
		if count == 0 {
			os.Remove(path)
		}
		return nil, fmt.Errorf("checkpoint: %w", atomicfile.ErrStopped)
	}
	if open.files == nil {
		open.files = map[*File]bool{}
	}
	open.files[c] = true
	return c, nil
}

// Append writes the records of items first, first+1, … (each of the
// header's Record bytes), each with its item and CRC, and syncs the file
// when it was last synced SyncEvery ago.
func (c *File) Append(first int, recs [][]byte) error {
	return c.append(func(k int) int { return first + k }, recs)
}

// AppendItems writes recs[k] as the record of items[k].
func (c *File) AppendItems(items []int, recs [][]byte) error {
	if len(items) != len(recs) {
		panic("checkpoint: items and records differ in number")
	}
	return c.append(func(k int) int { return items[k] }, recs)
}

func (c *File) append(item func(int) int, recs [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return errors.New("checkpoint: closed")
	}
	b := c.buf[:0] // kept between batches: a run's records are written without garbage
	for k, r := range recs {
		if len(r) != c.rec {
			panic("checkpoint: record of the wrong size")
		}
		start := len(b)
		b = binary.LittleEndian.AppendUint64(b, uint64(item(k)))
		b = append(b, r...)
		b = binary.LittleEndian.AppendUint32(b, crc32.Update(c.key, castagnoli, b[start:]))
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
// to end, releases every lock, and returns the checkpoints' notes, for a
// process stopped by a signal just before it exits.
func CloseAll() []string {
	open.Lock()
	open.closed = true
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
	releaseAll()
	return notes
}
