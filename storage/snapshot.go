package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// Snapshot stream format, version 1:
//
//	header:  "DOCKETSN" | u32 version | u64 applied index
//	records: u32 key length | key | u32 value length | value   (repeated)
//	trailer: u32 0xFFFFFFFF | u32 CRC-32C of every byte before the trailer
//
// A restore that does not reach a trailer with a matching checksum is
// incomplete and must not be swapped in.
const (
	snapMagic      = "DOCKETSN"
	SnapVersion    = 1
	snapEndMarker  = 0xFFFFFFFF
	maxSnapKeyLen  = 1 << 20
	maxSnapValLen  = 64 << 20
	snapBufferSize = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot means the stream is not a complete Docket snapshot.
var ErrBadSnapshot = errors.New("bad snapshot")

// SnapshotWriter streams key/value pairs in the snapshot format.
type SnapshotWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	out io.Writer // w and crc together
	buf [4]byte
}

// NewSnapshotWriter writes the header for a snapshot at applied.
func NewSnapshotWriter(w io.Writer, applied uint64) (*SnapshotWriter, error) {
	bw := bufio.NewWriterSize(w, snapBufferSize)
	c := crc32.New(crcTable)
	sw := &SnapshotWriter{w: bw, crc: c, out: io.MultiWriter(bw, c)}
	hdr := make([]byte, 0, len(snapMagic)+12)
	hdr = append(hdr, snapMagic...)
	hdr = binary.BigEndian.AppendUint32(hdr, SnapVersion)
	hdr = binary.BigEndian.AppendUint64(hdr, applied)
	if _, err := sw.out.Write(hdr); err != nil {
		return nil, fmt.Errorf("snapshot header: %w", err)
	}
	return sw, nil
}

func (s *SnapshotWriter) writeLen(n int) error {
	binary.BigEndian.PutUint32(s.buf[:], uint32(n))
	_, err := s.out.Write(s.buf[:])
	return err
}

// Add writes one pair.
func (s *SnapshotWriter) Add(key, value []byte) error {
	if err := s.writeLen(len(key)); err != nil {
		return fmt.Errorf("snapshot record: %w", err)
	}
	if _, err := s.out.Write(key); err != nil {
		return fmt.Errorf("snapshot record: %w", err)
	}
	if err := s.writeLen(len(value)); err != nil {
		return fmt.Errorf("snapshot record: %w", err)
	}
	if _, err := s.out.Write(value); err != nil {
		return fmt.Errorf("snapshot record: %w", err)
	}
	return nil
}

// Close writes the trailer and flushes. It does not close the underlying writer.
func (s *SnapshotWriter) Close() error {
	if err := s.writeLen(snapEndMarker); err != nil {
		return fmt.Errorf("snapshot trailer: %w", err)
	}
	binary.BigEndian.PutUint32(s.buf[:], s.crc.Sum32())
	if _, err := s.w.Write(s.buf[:]); err != nil {
		return fmt.Errorf("snapshot trailer: %w", err)
	}
	return s.w.Flush()
}

// ReadSnapshot reads a stream written by SnapshotWriter, calling fn for each
// pair (slices valid only during fn). It returns the applied index of the
// header only once the trailer's checksum matched.
func ReadSnapshot(r io.Reader, fn func(key, value []byte) error) (uint64, error) {
	br := bufio.NewReaderSize(r, snapBufferSize)
	c := crc32.New(crcTable)
	tr := io.TeeReader(br, c)
	hdr := make([]byte, len(snapMagic)+12)
	if _, err := io.ReadFull(tr, hdr); err != nil {
		return 0, fmt.Errorf("%w: header: %v", ErrBadSnapshot, err)
	}
	if string(hdr[:len(snapMagic)]) != snapMagic {
		return 0, fmt.Errorf("%w: magic %q", ErrBadSnapshot, hdr[:len(snapMagic)])
	}
	if v := binary.BigEndian.Uint32(hdr[len(snapMagic):]); v != SnapVersion {
		return 0, fmt.Errorf("%w: version %d, this build reads %d", ErrBadSnapshot, v, SnapVersion)
	}
	applied := binary.BigEndian.Uint64(hdr[len(snapMagic)+4:])
	var lenBuf [4]byte
	var key, val []byte
	readLen := func(max int) (int, bool, error) {
		if _, err := io.ReadFull(tr, lenBuf[:]); err != nil {
			return 0, false, fmt.Errorf("%w: record length: %v", ErrBadSnapshot, err)
		}
		n := binary.BigEndian.Uint32(lenBuf[:])
		if n == snapEndMarker {
			return 0, true, nil
		}
		if int(n) > max {
			return 0, false, fmt.Errorf("%w: record of %d bytes", ErrBadSnapshot, n)
		}
		return int(n), false, nil
	}
	for {
		n, end, err := readLen(maxSnapKeyLen)
		if err != nil {
			return 0, err
		}
		if end {
			break
		}
		key = grow(key, n)
		if _, err := io.ReadFull(tr, key); err != nil {
			return 0, fmt.Errorf("%w: key: %v", ErrBadSnapshot, err)
		}
		n, end, err = readLen(maxSnapValLen)
		if err != nil {
			return 0, err
		}
		if end {
			return 0, fmt.Errorf("%w: end marker in place of a value", ErrBadSnapshot)
		}
		val = grow(val, n)
		if _, err := io.ReadFull(tr, val); err != nil {
			return 0, fmt.Errorf("%w: value: %v", ErrBadSnapshot, err)
		}
		if err := fn(key, val); err != nil {
			return 0, err
		}
	}
	want := c.Sum32()
	if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
		return 0, fmt.Errorf("%w: checksum: %v", ErrBadSnapshot, err)
	}
	if got := binary.BigEndian.Uint32(lenBuf[:]); got != want {
		return 0, fmt.Errorf("%w: checksum %08x, computed %08x", ErrBadSnapshot, got, want)
	}
	return applied, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
