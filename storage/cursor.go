package storage

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// ErrBadCursor means a listing's cursor was not one that a listing of the
// same queue, tenant and state (or, for Stats, the same queue filter)
// handed out. It is the caller's mistake; fsm answers it as a FieldError
// on "cursor".
var ErrBadCursor = errors.New("bad list cursor")

// A cursor is base64url (no padding) of a version byte and the key of the
// last item listed. Callers treat it as opaque: the key layout may change
// under a new version byte without changing the API.
const (
	cursorV1 byte = 1
	// maxCursorLen bounds an encoded cursor, so a hostile one costs no
	// more than a short decode. Keys are at most about 400 bytes: two
	// names of 128 (fsm.MaxNameLen), an id of 64 and fixed parts.
	maxCursorLen = 1024
)

var cursorEncoding = base64.RawURLEncoding

// encodeCursor is the cursor of a listing that stopped after key.
func encodeCursor(key []byte) string {
	b := make([]byte, 0, 1+len(key))
	return cursorEncoding.EncodeToString(append(append(b, cursorV1), key...))
}

// decodeCursor returns the key a cursor names. The key must lie strictly
// inside the listed range (after prefix, under PrefixEnd(prefix)) and, when
// parse is set, parse as a key of that range: a cursor can never move a
// scan into another queue's, tenant's or state's keys.
func decodeCursor(cursor string, prefix []byte, parse func(key []byte) error) ([]byte, error) {
	if len(cursor) > maxCursorLen {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrBadCursor, len(cursor), maxCursorLen)
	}
	b, err := cursorEncoding.DecodeString(cursor)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	if len(b) == 0 || b[0] != cursorV1 {
		return nil, fmt.Errorf("%w: unknown version", ErrBadCursor)
	}
	key := b[1:]
	if len(key) <= len(prefix) || !bytes.HasPrefix(key, prefix) {
		return nil, fmt.Errorf("%w: not of this listing", ErrBadCursor)
	}
	if parse != nil {
		if err := parse(key); err != nil {
			return nil, fmt.Errorf("%w: not of this listing", ErrBadCursor)
		}
	}
	return key, nil
}
