package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
)

// ErrChecksum means a command entry's bytes differ from those its proposer
// checksummed: the entry was damaged after the leader built it, in memory,
// in flight or on a disk. Such an entry is never stored, replicated or
// applied.
var ErrChecksum = errors.New("command checksum mismatch")

// cmdSumMagic starts the Extensions of a command entry that carries its
// proposer's checksum; the CRC-32C of the entry's Data follows.
const (
	cmdSumMagic = "dkc1"
	cmdSumLen   = len(cmdSumMagic) + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CommandExtension is the raft.Log.Extensions a leader proposes data with:
// its checksum, which Raft stores and replicates with the entry, then the
// feature level the command needs (features.go).
func CommandExtension(data []byte, level uint32) []byte {
	ext := make([]byte, cmdSumLen, cmdSumLen+binary.MaxVarintLen32)
	copy(ext, cmdSumMagic)
	binary.BigEndian.PutUint32(ext[len(cmdSumMagic):], crc32.Checksum(data, castagnoli))
	return levelExtension(ext, level)
}

// VerifyCommand checks a command entry's data against its proposer's
// checksum. Entries that are not commands pass, and so do commands with no
// Extensions at all: Raft's own entries, and commands proposed by a build
// that predates checksums (a rolling upgrade's older leader). Any other
// Extensions must carry the checksum; bytes after it are reserved for later
// builds and ignored. Errors wrap ErrChecksum.
func VerifyCommand(l *raft.Log) error {
	if l.Type != raft.LogCommand || len(l.Extensions) == 0 {
		return nil
	}
	ext := l.Extensions
	if len(ext) < cmdSumLen || string(ext[:len(cmdSumMagic)]) != cmdSumMagic {
		return fmt.Errorf("%w: entry %d (term %d): extensions %x carry no checksum", ErrChecksum, l.Index, l.Term, ext)
	}
	want := binary.BigEndian.Uint32(ext[len(cmdSumMagic):cmdSumLen])
	if got := crc32.Checksum(l.Data, castagnoli); got != want {
		return fmt.Errorf("%w: entry %d (term %d): data crc32c %08x, proposer's %08x", ErrChecksum, l.Index, l.Term, got, want)
	}
	return nil
}
