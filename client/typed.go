package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Typed handlers. A Handler takes and returns bytes; Handle and
// HandleResult adapt a function of a Go type to it, so that a handler
// says what its payload is and the decoding is written once:
//
//	client.Handle(func(ctx context.Context, t *client.Task, e Email) error { ... })
//
// The payload is decoded with a Codec (JSONCodec unless HandleCodec
// names another), and a result is encoded with the same Codec. The
// producer's side is EnqueueJSON.

// ErrBadPayload wraps the error of a typed handler whose task's payload
// does not decode as its argument type. The Worker nacks such a task like
// any other error, so it is retried and, at its max attempts, ends among
// the dead letters with that error as its last_error; see Handle for why
// it is not failed at once.
var ErrBadPayload = errors.New("docket: payload does not decode")

// Codec turns a typed handler's argument and result into bytes and back.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec: encoding/json, which ignores unknown
// fields, so a producer may add a field before every worker knows it.
type JSONCodec struct{}

// Marshal is json.Marshal.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal is json.Unmarshal.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Handle adapts fn, whose argument is the task's payload decoded as T with
// JSONCodec, to a Handler that completes the task with an empty result
// when fn returns nil. fn's errors mean what a Handler's do (Permanent,
// RetryAfter, any other error nacks).
//
// A payload that does not decode as T (an empty one included: it is not
// JSON) is nacked with an error wrapping ErrBadPayload that names T and
// the decoder's complaint. It is not failed at once: while workers are
// being upgraded, a payload one build cannot read another may, so the
// task is retried like any failure, and when no worker can read it, it
// reaches the dead letters after its max attempts, with the cause in its
// last_error, where it can be requeued once a worker that reads it runs.
func Handle[T any](fn func(ctx context.Context, t *Task, args T) error) Handler {
	return HandleCodec(JSONCodec{}, func(ctx context.Context, t *Task, args T) (struct{}, error) {
		return struct{}{}, fn(ctx, t, args)
	})
}

// HandleResult is Handle for a function with a result: a nil error
// completes the task with the result encoded by JSONCodec.
func HandleResult[T, R any](fn func(ctx context.Context, t *Task, args T) (R, error)) Handler {
	return HandleCodec(JSONCodec{}, fn)
}

// HandleCodec is HandleResult with codec for the payload and the result.
// A result that codec cannot encode fails the task for good (Permanent):
// the work is done, and running it again would repeat its effects to
// fail the same way. A function whose result type is struct{} (Handle's)
// completes its tasks with no result.
func HandleCodec[T, R any](codec Codec, fn func(ctx context.Context, t *Task, args T) (R, error)) Handler {
	_, noResult := any(fn).(func(context.Context, *Task, T) (struct{}, error))
	return func(ctx context.Context, t *Task) ([]byte, error) {
		var args T
		if err := codec.Unmarshal(t.Payload(), &args); err != nil {
			return nil, fmt.Errorf("%w as %T: %w", ErrBadPayload, args, err)
		}
		res, err := fn(ctx, t, args)
		if err != nil || noResult {
			return nil, err
		}
		out, err := codec.Marshal(res)
		if err != nil {
			return nil, Permanent(fmt.Errorf("encode the result %T of task %s: %w", res, t.ID(), err))
		}
		return out, nil
	}
}

// EnqueueJSON adds one task whose payload is args encoded as JSON, the
// payload a Handle[T] worker decodes, and returns its id. For another
// Codec, encode the payload and call EnqueueOne.
func (c *Client) EnqueueJSON(ctx context.Context, queue string, args any, opts ...TaskOption) (string, error) {
	payload, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("EnqueueJSON: encode %T: %w", args, err)
	}
	return c.EnqueueOne(ctx, queue, payload, opts...)
}
