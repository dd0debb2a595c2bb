package volume

import (
	"bufio"
	"encoding/binary"
	"io"
)

type le struct{}

func (le) Uint16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func (le) Uint32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func (le) Uint64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

type be struct{}

func (be) Uint16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
func (be) Uint32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func (be) Uint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 1<<20) }
