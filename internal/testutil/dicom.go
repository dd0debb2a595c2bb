package testutil

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
)

// DICOMSlice describes one CT slice for DICOMFile: a DICOM Part 10 file
// of 16-bit pixels.
type DICOMSlice struct {
	Syntax              string // transfer syntax UID; "": explicit VR little endian
	Series, Description string
	Instance            int
	IPP                 [3]float64 // ImagePositionPatient, mm
	IOP                 [6]float64 // ImageOrientationPatient: row, then column cosines
	PixelSpacing        [2]float64 // between rows, between columns, mm
	Rows, Cols          int
	Signed              bool
	Slope, Intercept    float64
	Pixels              []int16 // Rows·Cols stored values, row by row
	Frames              int     // > 0: a NumberOfFrames element
	// Sequences adds, before the pixels, nested sequences of undefined
	// length (SQ, and in explicit VR a UN one), one of defined length and a
	// private OB element, for the reader to skip.
	Sequences bool
}

const (
	implicitLE = "1.2.840.10008.1.2"
	explicitLE = "1.2.840.10008.1.2.1"
)

// dicomWriter writes elements in one transfer syntax.
type dicomWriter struct {
	bytes.Buffer
	explicit bool
}

func (w *dicomWriter) tag(g, e uint16) {
	binary.Write(w, binary.LittleEndian, [2]uint16{g, e})
}

// el writes one element with a defined length; odd values are padded.
func (w *dicomWriter) el(g, e uint16, vr string, v []byte) {
	if len(v)%2 == 1 {
		pad := byte(' ')
		if vr == "UI" || vr == "OB" || vr == "UN" {
			pad = 0
		}
		v = append(v, pad)
	}
	w.tag(g, e)
	switch {
	case !w.explicit:
		binary.Write(w, binary.LittleEndian, uint32(len(v)))
	case vr == "OB" || vr == "OW" || vr == "SQ" || vr == "UN" || vr == "UT":
		w.WriteString(vr + "\x00\x00")
		binary.Write(w, binary.LittleEndian, uint32(len(v)))
	default:
		w.WriteString(vr)
		binary.Write(w, binary.LittleEndian, uint16(len(v)))
	}
	w.Write(v)
}

func (w *dicomWriter) str(g, e uint16, vr, s string) { w.el(g, e, vr, []byte(s)) }

func (w *dicomWriter) us(g, e uint16, x int) {
	w.el(g, e, "US", binary.LittleEndian.AppendUint16(nil, uint16(x)))
}

func (w *dicomWriter) ds(g, e uint16, x ...float64) {
	parts := make([]string, len(x))
	for i, v := range x {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	w.str(g, e, "DS", strings.Join(parts, `\`))
}

// undefined starts an element of undefined length (a sequence).
func (w *dicomWriter) undefined(g, e uint16, vr string) {
	w.tag(g, e)
	if w.explicit {
		w.WriteString(vr + "\x00\x00")
	}
	binary.Write(w, binary.LittleEndian, uint32(0xFFFFFFFF))
}

// item writes an item tag with a length (0xFFFFFFFF: undefined) or a
// delimiter (E00D, E0DD).
func (w *dicomWriter) item(e uint16, length uint32) {
	w.tag(0xFFFE, e)
	binary.Write(w, binary.LittleEndian, length)
}

// DICOMFile encodes s as a DICOM Part 10 file.
func DICOMFile(s DICOMSlice) []byte {
	syntax := s.Syntax
	if syntax == "" {
		syntax = explicitLE
	}
	sop := "1.2.826.0.1.3680043.8.498.2." + strconv.Itoa(s.Instance)
	meta := &dicomWriter{explicit: true}
	meta.el(0x0002, 0x0001, "OB", []byte{0, 1})
	meta.str(0x0002, 0x0002, "UI", "1.2.840.10008.5.1.4.1.1.2")
	meta.str(0x0002, 0x0003, "UI", sop)
	meta.str(0x0002, 0x0010, "UI", syntax)
	meta.str(0x0002, 0x0012, "UI", "1.2.826.0.1.3680043.8.498.1")
	out := &dicomWriter{explicit: true}
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	out.el(0x0002, 0x0000, "UL", binary.LittleEndian.AppendUint32(nil, uint32(meta.Len())))
	out.Write(meta.Bytes())

	w := &dicomWriter{explicit: syntax != implicitLE}
	w.str(0x0008, 0x0016, "UI", "1.2.840.10008.5.1.4.1.1.2")
	w.str(0x0008, 0x0018, "UI", sop)
	w.str(0x0008, 0x0060, "CS", "CT")
	w.str(0x0008, 0x103E, "LO", s.Description)
	if s.Sequences {
		// ReferencedImageSequence: an undefined-length item holding a
		// nested undefined-length sequence, then a defined-length item.
		w.undefined(0x0008, 0x1140, "SQ")
		w.item(0xE000, 0xFFFFFFFF)
		w.str(0x0008, 0x1150, "UI", "1.2.840.10008.5.1.4.1.1.2")
		w.undefined(0x0008, 0x9215, "SQ")
		w.item(0xE000, 0xFFFFFFFF)
		w.str(0x0008, 0x0100, "SH", "121311")
		w.item(0xE00D, 0)
		w.item(0xE0DD, 0)
		w.item(0xE00D, 0)
		inner := &dicomWriter{explicit: w.explicit}
		inner.str(0x0008, 0x1155, "UI", "1.2.3.4")
		w.item(0xE000, uint32(inner.Len()))
		w.Write(inner.Bytes())
		w.item(0xE0DD, 0)
		// A defined-length sequence holding ImagePositionPatient, which
		// must not be taken for the slice's.
		seq := &dicomWriter{explicit: w.explicit}
		item := &dicomWriter{explicit: w.explicit}
		item.ds(0x0020, 0x0032, 999, 999, 999)
		seq.item(0xE000, uint32(item.Len()))
		seq.Write(item.Bytes())
		w.el(0x0008, 0x2112, "SQ", seq.Bytes())
	}
	w.str(0x0018, 0x0050, "DS", "1")
	w.str(0x0020, 0x000E, "UI", s.Series)
	w.str(0x0020, 0x0013, "IS", strconv.Itoa(s.Instance))
	w.ds(0x0020, 0x0032, s.IPP[:]...)
	w.ds(0x0020, 0x0037, s.IOP[:]...)
	w.us(0x0028, 0x0002, 1)
	w.str(0x0028, 0x0004, "CS", "MONOCHROME2")
	if s.Frames > 0 {
		w.str(0x0028, 0x0008, "IS", strconv.Itoa(s.Frames))
	}
	w.us(0x0028, 0x0010, s.Rows)
	w.us(0x0028, 0x0011, s.Cols)
	w.ds(0x0028, 0x0030, s.PixelSpacing[:]...)
	w.us(0x0028, 0x0100, 16)
	w.us(0x0028, 0x0101, 16)
	w.us(0x0028, 0x0102, 15)
	rep := 0
	if s.Signed {
		rep = 1
	}
	w.us(0x0028, 0x0103, rep)
	w.ds(0x0028, 0x1052, s.Intercept)
	w.ds(0x0028, 0x1053, s.Slope)
	if s.Sequences {
		w.str(0x0029, 0x0010, "LO", "TAPELOOP TEST")
		w.el(0x0029, 0x1010, "OB", []byte{1, 2, 3, 4, 5})
		if w.explicit {
			// A UN sequence of undefined length: implicit VR inside.
			w.undefined(0x0029, 0x1020, "UN")
			w.item(0xE000, 0xFFFFFFFF)
			in := &dicomWriter{explicit: false}
			in.str(0x0029, 0x1021, "LO", "inside UN")
			w.Write(in.Bytes())
			w.item(0xE00D, 0)
			w.item(0xE0DD, 0)
		}
	}
	px := make([]byte, 0, 2*len(s.Pixels))
	for _, v := range s.Pixels {
		px = binary.LittleEndian.AppendUint16(px, uint16(v))
	}
	if syntax != implicitLE && syntax != explicitLE {
		// Encapsulated: an empty offset table, one fragment.
		w.undefined(0x7FE0, 0x0010, "OB")
		w.item(0xE000, 0)
		w.item(0xE000, uint32(len(px)))
		w.Write(px)
		w.item(0xE0DD, 0)
	} else {
		w.el(0x7FE0, 0x0010, "OW", px)
	}
	out.Write(w.Bytes())
	return out.Bytes()
}
