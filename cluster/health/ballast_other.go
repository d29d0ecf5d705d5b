//go:build !unix

package health

import "errors"

// freeBytes is not known here, so no ballast is written.
func freeBytes(string) (uint64, error) {
	return 0, errors.New("free space unknown on this platform")
}
