package storage

import (
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Tokens live in k/: the record under the hash of its secret, so that
// authenticating a request is one Get, and an accessor index for list and
// revoke.
//
//	k/h/<hex sha256>   token record (pb.Token)
//	k/a/<accessor>     hex sha256 of the token's secret
//	k/bootstrapped     set once the bootstrap token was created
var (
	prefixTokenHash     = []byte("k/h/")
	prefixTokenAccessor = []byte("k/a/")
	// KeyBootstrapped latches the bootstrap token: it is created once in
	// a cluster's life, even after it is revoked.
	KeyBootstrapped = []byte("k/bootstrapped")
)

// TokenHashKey is k/h/<hex hash>.
func TokenHashKey(hash []byte) []byte {
	return append(append([]byte{}, prefixTokenHash...), hex.EncodeToString(hash)...)
}

// TokenAccessorKey is k/a/<accessor>.
func TokenAccessorKey(accessor string) []byte {
	return append(append([]byte{}, prefixTokenAccessor...), accessor...)
}

// TokenAccessorPrefix bounds a scan over every token's accessor.
func TokenAccessorPrefix() []byte { return prefixTokenAccessor }

// GetTokenByHash reads the token whose secret hashes to hash; ErrNotFound
// when there is none.
func GetTokenByHash(r Reader, hash []byte) (*pb.Token, error) {
	v, err := getCopy(r, TokenHashKey(hash))
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	t := &pb.Token{}
	if err := proto.Unmarshal(v, t); err != nil {
		return nil, fmt.Errorf("token: decode: %w", err)
	}
	return t, nil
}

// GetTokenByAccessor reads a token by its accessor; ErrNotFound when
// there is none.
func GetTokenByAccessor(r Reader, accessor string) (*pb.Token, error) {
	h, err := getCopy(r, TokenAccessorKey(accessor))
	if err != nil {
		return nil, fmt.Errorf("token %s: %w", accessor, err)
	}
	hash, err := hex.DecodeString(string(h))
	if err != nil {
		return nil, fmt.Errorf("token %s: index: %w", accessor, err)
	}
	return GetTokenByHash(r, hash)
}

// PutToken writes a token's record and its accessor index.
func PutToken(w Writer, t *pb.Token) error {
	v, err := marshal.Marshal(t)
	if err != nil {
		return fmt.Errorf("token %s: encode: %w", t.GetAccessor(), err)
	}
	if err := w.Set(TokenHashKey(t.GetSecretHash()), v, nil); err != nil {
		return err
	}
	return w.Set(TokenAccessorKey(t.GetAccessor()), []byte(hex.EncodeToString(t.GetSecretHash())), nil)
}

// DeleteToken removes a token's record and its index.
func DeleteToken(w Writer, t *pb.Token) error {
	if err := w.Delete(TokenHashKey(t.GetSecretHash()), nil); err != nil {
		return err
	}
	return w.Delete(TokenAccessorKey(t.GetAccessor()), nil)
}

// ListTokens reads every token, in accessor order.
func ListTokens(r Reader) ([]*pb.Token, error) {
	var out []*pb.Token
	p := prefixTokenAccessor
	err := Scan(r, p, PrefixEnd(p), 0, func(k, v []byte) error {
		hash, err := hex.DecodeString(string(v))
		if err != nil {
			return fmt.Errorf("token index %q: %w", k, err)
		}
		t, err := GetTokenByHash(r, hash)
		if err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// Bootstrapped reports whether KeyBootstrapped is set.
func Bootstrapped(r Reader) (bool, error) {
	_, err := getCopy(r, KeyBootstrapped)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
