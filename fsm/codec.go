package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// EncodeCommand is the log entry's bytes for cmd.
func EncodeCommand(cmd *pb.Command) ([]byte, error) {
	b, err := marshalOpts.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %v: %w", cmd.GetType(), err)
	}
	return b, nil
}

// DecodeCommand parses a log entry and checks that this build knows its
// type. Its errors wrap ErrDecode or ErrUnknownCommand; the FSM stops the
// node on either, because applying a command it cannot read would diverge.
func DecodeCommand(data []byte) (*pb.Command, error) {
	cmd, ok := decodeFast(data)
	if !ok {
		cmd = &pb.Command{}
		if err := proto.Unmarshal(data, cmd); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDecode, err)
		}
	}
	if !knownType(cmd.GetType()) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownCommand, cmd.GetType())
	}
	// A batched command of a type this build does not know is a newer
	// leader's command like any other: stop rather than reject it here
	// while newer replicas apply it.
	for i, sub := range cmd.GetBatch().GetCommands() {
		if !knownType(sub.GetType()) {
			return nil, fmt.Errorf("%w: %d in batch command %d", ErrUnknownCommand, sub.GetType(), i)
		}
	}
	return cmd, nil
}

// knownType: SET_CLUSTER_ID (29) is the highest type this build knows.
func knownType(t pb.CommandType) bool {
	return t > pb.CommandType_COMMAND_TYPE_UNSPECIFIED && t <= pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT
}
