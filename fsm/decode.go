package fsm

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// decodeFast decodes the commands of the data path (Enqueue, Claim,
// Heartbeat, Submit, Nack, and Batches of them) by hand. It reports false
// for anything it does not take exactly as proto.Unmarshal would: another
// command type, a field it does not know, a wire type that is not the
// field's, a singular message given twice, a string that is not UTF-8, a
// nested Batch, or bytes that do not parse. DecodeCommand then decodes
// with proto, so the rare shapes keep proto's meaning, unknown fields and
// errors.
//
// Why: every node decodes every entry, and proto's reflective decoder
// was 5-7 % of a follower's CPU in a batched enqueue and a drain.
// FuzzDecodeCommand holds the two decoders equal.
func decodeFast(data []byte) (*pb.Command, bool) {
	cmd := &pb.Command{}
	if !fastCommand(data, cmd, false) {
		return nil, false
	}
	return cmd, true
}

// wireFields calls f with each field of b: its number and type, its value
// if a varint, its bytes if length-delimited. It reports false when b does
// not parse, holds another wire type, or f refuses a field.
func wireFields(b []byte, f func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var x uint64
		var v []byte
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			return false
		}
		if n < 0 || !f(num, typ, x, v) {
			return false
		}
		b = b[n:]
	}
	return true
}

// str is a string field's value as proto3 takes it: valid UTF-8 or not at
// all.
func str(v []byte, into *string) bool {
	if !utf8.Valid(v) {
		return false
	}
	*into = string(v)
	return true
}

// raw is a bytes field's value as proto takes it: a copy, nil when empty.
func raw(v []byte) []byte { return append([]byte(nil), v...) }

const (
	vt = protowire.VarintType
	bt = protowire.BytesType
)

func fastCommand(b []byte, cmd *pb.Command, inBatch bool) bool {
	hasBody := false
	return wireFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool {
		switch {
		case num == 1 && typ == vt:
			cmd.Type = pb.CommandType(int32(x))
			return true
		case num == 2 && typ == vt:
			cmd.Now = int64(x)
			return true
		case typ != bt || hasBody:
			return false // a second body merges or replaces: proto's to decide
		}
		hasBody = true
		switch num {
		case 10:
			m := &pb.EnqueueCmd{}
			cmd.Body = &pb.Command_Enqueue{Enqueue: m}
			return fastEnqueue(v, m)
		case 11:
			m := &pb.ClaimCmd{}
			cmd.Body = &pb.Command_Claim{Claim: m}
			return fastClaim(v, m)
		case 12:
			m := &pb.HeartbeatCmd{}
			cmd.Body = &pb.Command_Heartbeat{Heartbeat: m}
			return fastHeartbeat(v, m)
		case 13:
			m := &pb.SubmitCmd{}
			cmd.Body = &pb.Command_Submit{Submit: m}
			return fastSubmit(v, m)
		case 14:
			m := &pb.NackCmd{}
			cmd.Body = &pb.Command_Nack{Nack: m}
			return fastNack(v, m)
		case 20:
			if inBatch {
				return false
			}
			m := &pb.BatchCmd{}
			cmd.Body = &pb.Command_Batch{Batch: m}
			return wireFields(v, func(num protowire.Number, typ protowire.Type, _ uint64, v []byte) bool {
				if num != 1 || typ != bt {
					return false
				}
				sub := &pb.Command{}
				m.Commands = append(m.Commands, sub)
				return fastCommand(v, sub, true)
			})
		}
		return false
	})
}

// names interns the queue and tenant names of one command: its tasks
// mostly share them, and each string is an allocation.
type names struct{ queue, tenant string }

func (n *names) take(v []byte, last, into *string) bool {
	if *last != "" && *last == string(v) { // compared without a copy
		*into = *last
		return true
	}
	if !str(v, into) {
		return false
	}
	*last = *into
	return true
}

func fastEnqueue(b []byte, m *pb.EnqueueCmd) bool {
	var seen names
	return wireFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, v []byte) bool {
		switch {
		case num == 1 && typ == bt:
			t := &pb.NewTask{}
			m.Tasks = append(m.Tasks, t)
			return fastNewTask(v, t, &seen)
		case num == 2 && typ == bt && m.Limits == nil:
			m.Limits = &pb.TenantLimits{}
			return wireFields(v, func(num protowire.Number, typ protowire.Type, x uint64, _ []byte) bool {
				switch {
				case num == 1 && typ == vt:
					m.Limits.MaxTasks = x
				case num == 2 && typ == vt:
					m.Limits.MaxBytes = x
				default:
					return false
				}
				return true
			})
		}
		return false
	})
}

// fastNewTask takes every field of NewTask but retry, after and
// after_index, which send the command to proto.
func fastNewTask(b []byte, t *pb.NewTask, seen *names) bool {
	return wireFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool {
		if typ == bt {
			switch num {
			case 1:
				return seen.take(v, &seen.queue, &t.Queue)
			case 2:
				return seen.take(v, &seen.tenant, &t.Tenant)
			case 3:
				t.Payload = raw(v)
			case 8:
				return str(v, &t.IdempotencyKey)
			case 150:
				t.Key = raw(v)
			default:
				return false
			}
			return true
		}
		switch num {
		case 4:
			t.Priority = uint32(x)
		case 5:
			t.RunAt = int64(x)
		case 6:
			t.DelayNs = int64(x)
		case 7:
			t.MaxAttempts = uint32(x)
		case 9:
			t.RetentionNs = int64(x)
		case 110:
			t.TimeoutNs = int64(x)
		case 111:
			t.RetryOnTimeout = protowire.DecodeBool(x)
		case 132:
			t.OnParentFailure = pb.ParentFailurePolicy(int32(x))
		default:
			return false
		}
		return true
	})
}

func fastClaim(b []byte, m *pb.ClaimCmd) bool {
	return wireFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool {
		switch {
		case num == 1 && typ == bt:
			return str(v, &m.Queue)
		case num == 2 && typ == bt:
			return str(v, &m.Tenant)
		case num == 3 && typ == bt:
			return str(v, &m.WorkerId)
		case num == 4 && typ == vt:
			m.LeaseNs = int64(x)
		case num == 5 && typ == vt:
			m.MaxTasks = uint32(x)
		default:
			return false
		}
		return true
	})
}

func fastHeartbeat(b []byte, m *pb.HeartbeatCmd) bool {
	return wireFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, v []byte) bool {
		if num != 1 || typ != bt {
			return false
		}
		it := &pb.HeartbeatItem{}
		m.Items = append(m.Items, it)
		return wireFields(v, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool {
			switch {
			case num == 1 && typ == bt:
				return str(v, &it.TaskId)
			case num == 2 && typ == vt:
				it.Fence = x
			case num == 3 && typ == bt:
				it.Progress = raw(v)
			case num == 4 && typ == vt:
				it.HasProgress = protowire.DecodeBool(x)
			case num == 5 && typ == vt:
				it.LeaseNs = int64(x)
			case num == 6 && typ == bt:
				return str(v, &it.Tenant)
			default:
				return false
			}
			return true
		})
	})
}

func fastSubmit(b []byte, m *pb.SubmitCmd) bool {
	return wireFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool {
		switch {
		case num == 1 && typ == bt:
			return str(v, &m.TaskId)
		case num == 2 && typ == vt:
			m.Fence = x
		case num == 3 && typ == vt:
			m.Outcome = pb.Outcome(int32(x))
		case num == 4 && typ == bt:
			m.Result = raw(v)
		case num == 5 && typ == bt:
			return str(v, &m.Error)
		case num == 6 && typ == bt:
			return str(v, &m.Tenant)
		default:
			return false
		}
		return true
	})
}

func fastNack(b []byte, m *pb.NackCmd) bool {
	return wireFields(b, func(num protowire.Number, typ protowire.Type, x uint64, v []byte) bool {
		switch {
		case num == 1 && typ == bt:
			return str(v, &m.TaskId)
		case num == 2 && typ == vt:
			m.Fence = x
		case num == 3 && typ == vt:
			m.DelayNs = int64(x)
		case num == 4 && typ == bt:
			return str(v, &m.Reason)
		case num == 5 && typ == bt:
			return str(v, &m.Tenant)
		default:
			return false
		}
		return true
	})
}
