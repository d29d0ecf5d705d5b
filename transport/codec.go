package transport

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protov2 "google.golang.org/protobuf/proto"
)

// decodeError is a request that did not decode: invalid UTF-8 in a string
// field, or bytes that are not protobuf. It is the caller's fault, and
// toStatus answers InvalidArgument.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return "request does not decode: " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// requestCodec is gRPC's proto codec, except that a request that fails to
// decode is reported as InvalidArgument instead of Internal.
//
// gRPC decodes a request before any interceptor runs, and wraps every
// codec error in codes.Internal ("failed to unmarshal"), so a codec cannot
// choose the code by its error alone. Instead Unmarshal records the
// failure against the message it was given and returns nil; the message
// is then handed to the interceptors, and the first one (unary, or a
// stream's RecvMsg) takes the failure back and answers InvalidArgument
// before any handler sees the half-decoded message. Every unary request
// and every stream receive passes through those interceptors, so each
// recorded failure is taken exactly once.
//
// The other way, declaring text fields as bytes and checking UTF-8 in
// Validate, has the same wire format but changes every Go type that
// carries a queue, tenant or id; this keeps the API types as they are.
type requestCodec struct {
	base   encoding.CodecV2
	failed sync.Map // message (a pointer) -> error, until the interceptor takes it
}

func newRequestCodec() *requestCodec {
	return &requestCodec{base: encoding.GetCodecV2(proto.Name)}
}

func (c *requestCodec) Name() string { return proto.Name }

// Marshal encodes claim answers by hand (marshalAnswer) and anything else
// with gRPC's proto codec.
func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) {
	if data, ok, err := marshalAnswer(v); ok {
		return data, err
	}
	return c.base.Marshal(v)
}

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if _, ok := v.(protov2.Message); err == nil || !ok {
		// Not a message (never, from gRPC): the base codec's error stands.
		return err
	}
	c.failed.Store(v, err)
	return nil
}

// take returns the decode failure recorded for msg, once, or nil.
func (c *requestCodec) take(msg any) error {
	if err, ok := c.failed.LoadAndDelete(msg); ok {
		return &decodeError{err: err.(error)}
	}
	return nil
}

// streamInterceptor checks every message a stream receives.
func (c *requestCodec) streamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &checkedStream{ServerStream: ss, c: c})
}

type checkedStream struct {
	grpc.ServerStream
	c *requestCodec
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return toStatus(s.c.take(m))
}
