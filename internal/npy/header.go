package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Errors returned by the reader. They are wrapped with detail; test with errors.Is.
var (
	ErrFormat = errors.New("npy: invalid format")
	ErrDtype  = errors.New("npy: unsupported dtype")
)

var magic = []byte("\x93NUMPY")

// maxHeaderLen bounds the header dictionary a reader accepts, so a corrupt
// length field cannot make it allocate gigabytes.
const maxHeaderLen = 1 << 20

// Dtype is a NumPy array-protocol type: kind ('b', 'i', 'u', 'f'), item size
// in bytes and byte order.
type Dtype struct {
	Kind  byte
	Size  int
	Order binary.ByteOrder
}

// Float32, Float64, Int32 and Int64 are the little-endian types the
// writer emits.
var (
	Float32 = Dtype{Kind: 'f', Size: 4, Order: binary.LittleEndian}
	Float64 = Dtype{Kind: 'f', Size: 8, Order: binary.LittleEndian}
	Int32   = Dtype{Kind: 'i', Size: 4, Order: binary.LittleEndian}
	Int64   = Dtype{Kind: 'i', Size: 8, Order: binary.LittleEndian}
)

// String returns the descr string NumPy writes, such as "<f4".
func (d Dtype) String() string {
	o := "<"
	switch {
	case d.Size == 1:
		o = "|"
	case d.Order == binary.BigEndian:
		o = ">"
	}
	return fmt.Sprintf("%s%c%d", o, d.Kind, d.Size)
}

// Name is the NumPy name of the type, such as "float32".
func (d Dtype) Name() string {
	switch d.Kind {
	case 'b':
		return "bool"
	case 'i':
		return fmt.Sprintf("int%d", 8*d.Size)
	case 'u':
		return fmt.Sprintf("uint%d", 8*d.Size)
	case 'f':
		return fmt.Sprintf("float%d", 8*d.Size)
	}
	return d.String()
}

func parseDescr(s string) (Dtype, error) {
	if len(s) < 3 {
		return Dtype{}, fmt.Errorf("%w %q", ErrDtype, s)
	}
	var d Dtype
	switch s[0] {
	case '<':
		d.Order = binary.LittleEndian
	case '>':
		d.Order = binary.BigEndian
	case '|', '=':
		d.Order = binary.LittleEndian // '=' is native; every platform Go targets here is little endian
	default:
		return Dtype{}, fmt.Errorf("%w %q", ErrDtype, s)
	}
	d.Kind = s[1]
	n, err := strconv.Atoi(s[2:])
	if err != nil {
		return Dtype{}, fmt.Errorf("%w %q", ErrDtype, s)
	}
	d.Size = n
	ok := false
	switch d.Kind {
	case 'b':
		ok = n == 1
	case 'i', 'u':
		ok = n == 1 || n == 2 || n == 4 || n == 8
	case 'f':
		ok = n == 2 || n == 4 || n == 8
	}
	if !ok {
		return Dtype{}, fmt.Errorf("%w %q (want bool, int, uint, float16, float32 or float64)", ErrDtype, s)
	}
	return d, nil
}

// Header is the parsed header of a .npy file.
type Header struct {
	Dtype   Dtype
	Shape   []int
	Fortran bool // the data is stored in Fortran (column-major) order
}

// Transposed says whether the stored order differs from C order: Fortran
// order with more than one axis longer than 1.
func (h Header) Transposed() bool {
	if !h.Fortran {
		return false
	}
	long := 0
	for _, d := range h.Shape {
		if d > 1 {
			long++
		}
	}
	return long > 1
}

// Len is the number of elements, the product of Shape (1 for a 0-d array).
func (h Header) Len() int {
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	return n
}

// ShapeString formats the shape as NumPy prints it, e.g. "(300, 4096)".
func ShapeString(shape []int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// readHeader reads the magic string, version, header length and dictionary.
func readHeader(r *bufio.Reader) (Header, error) {
	h, _, err := readHeaderLen(r)
	return h, err
}

// readHeaderLen is readHeader that also returns the header's length in
// bytes: where the data starts.
func readHeaderLen(r *bufio.Reader) (Header, int64, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return Header{}, 0, fmt.Errorf("%w: file too short for a .npy header", ErrFormat)
	}
	if string(pre[:6]) != string(magic) {
		return Header{}, 0, fmt.Errorf("%w: not a .npy file (bad magic)", ErrFormat)
	}
	var hlen int
	pfx := int64(10)
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Header{}, 0, fmt.Errorf("%w: truncated header", ErrFormat)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Header{}, 0, fmt.Errorf("%w: truncated header", ErrFormat)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
		pfx = 12
	default:
		return Header{}, 0, fmt.Errorf("%w: unsupported version %d.%d", ErrFormat, pre[6], pre[7])
	}
	if hlen > maxHeaderLen {
		return Header{}, 0, fmt.Errorf("%w: header length %d too large", ErrFormat, hlen)
	}
	// Read as it arrives, not allocated at the length the file claims: a
	// short file claiming a long header costs what it holds.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(hlen)); err != nil {
		return Header{}, 0, fmt.Errorf("%w: truncated header", ErrFormat)
	}
	h, err := parseDict(buf.String())
	return h, pfx + int64(hlen), err
}

// parseDict parses the Python literal dictionary of a .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
func parseDict(s string) (Header, error) {
	p := &dictParser{s: strings.TrimSpace(s)}
	var h Header
	var haveDescr, haveOrder, haveShape bool
	if !p.eat('{') {
		return h, fmt.Errorf("%w: header is not a dictionary", ErrFormat)
	}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return h, err
		}
		p.space()
		if !p.eat(':') {
			return h, fmt.Errorf("%w: expected ':' after %q", ErrFormat, key)
		}
		p.space()
		switch key {
		case "descr":
			v, err := p.str()
			if err != nil {
				return h, err
			}
			if h.Dtype, err = parseDescr(v); err != nil {
				return h, err
			}
			haveDescr = true
		case "fortran_order":
			switch {
			case p.word("False"):
			case p.word("True"):
				h.Fortran = true
			default:
				return h, fmt.Errorf("%w: fortran_order is not True or False", ErrFormat)
			}
			haveOrder = true
		case "shape":
			if h.Shape, err = p.tuple(); err != nil {
				return h, err
			}
			haveShape = true
		default:
			return h, fmt.Errorf("%w: unknown header key %q", ErrFormat, key)
		}
		p.space()
		if !p.eat(',') {
			p.space()
			if !p.eat('}') {
				return h, fmt.Errorf("%w: expected ',' or '}' in header", ErrFormat)
			}
			break
		}
	}
	p.space()
	if p.i < len(p.s) && strings.Trim(p.s[p.i:], " \t\n\x00") != "" {
		return h, fmt.Errorf("%w: header has %q after its dictionary", ErrFormat, clip(p.s[p.i:], 20))
	}
	if !haveDescr || !haveOrder || !haveShape {
		return h, fmt.Errorf("%w: header lacks descr, fortran_order or shape", ErrFormat)
	}
	n := 1
	for _, d := range h.Shape {
		if d > 0 && n > math.MaxInt64/8/d {
			return h, fmt.Errorf("%w: shape %s too large", ErrFormat, ShapeString(h.Shape))
		}
		n *= d
	}
	return h, nil
}

// clip shortens s to at most n bytes for a message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

type dictParser struct {
	s string
	i int
}

func (p *dictParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *dictParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *dictParser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *dictParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("%w: expected a quoted string in header", ErrFormat)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("%w: unterminated string in header", ErrFormat)
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

func (p *dictParser) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, fmt.Errorf("%w: shape is not a tuple", ErrFormat)
	}
	shape := []int{}
	for {
		p.space()
		if p.eat(')') {
			return shape, nil
		}
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		// Python 2 era files may write long integers as 3L.
		d, err := strconv.Atoi(p.s[p.i:j])
		if err != nil || j-p.i > 18 {
			return nil, fmt.Errorf("%w: bad dimension in shape", ErrFormat)
		}
		p.i = j
		p.eat('L')
		shape = append(shape, d)
		p.space()
		if !p.eat(',') {
			p.space()
			if !p.eat(')') {
				return nil, fmt.Errorf("%w: bad shape tuple", ErrFormat)
			}
			return shape, nil
		}
	}
}
