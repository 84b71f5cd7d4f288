package mongosim

import (
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
)

// $changeStreamSplitLargeEvent (mongod 7.0+): the last stage of a change
// stream's pipeline may ask that an event larger than 16 MiB come as
// fragments, each with the event's resume token extended by its fragment
// number and splitEvent {fragment, of}; the other top-level fields are
// packed into the fragments smallest first, as mongod packs them.

const splitStageName = "$changeStreamSplitLargeEvent"

// takeSplitStage removes a final $changeStreamSplitLargeEvent from the
// stages after $changeStream and reports whether it was there; anywhere
// else it is refused.
func takeSplitStage(stages bson.A) (bson.A, bool, error) {
	for i, s := range stages {
		d, ok := s.(bson.D)
		if !ok || len(d) == 0 || d[0].Key != splitStageName {
			continue
		}
		if i != len(stages)-1 {
			return nil, false, cmderr.New(cmderr.BadValue, "%s must be the last stage in the pipeline", splitStageName)
		}
		if spec, ok := d[0].Value.(bson.D); !ok || len(spec) > 0 {
			return nil, false, cmderr.New(cmderr.BadValue, "%s takes an empty object, got %s", splitStageName, shellString(d[0].Value))
		}
		return stages[:i], true, nil
	}
	return stages, false, nil
}

// fragmentToken is the resume token of fragment n (from 1) of change seq:
// it sorts after seq's token and before seq+1's.
func fragmentToken(seq uint64, n int) bson.D {
	return bson.D{{Key: "_data", Value: fmt.Sprintf("82%016X02%04X", seq, n)}}
}

// maxEventBytes is the largest event (or fragment) a stream returns.
const maxEventBytes = maxBSONSize

// splitLargeEvent returns ev whole when it fits in maxEventBytes, else its
// fragments. Without split, a large event is mongod's BSONObjectTooLarge.
func splitLargeEvent(ev bson.D, seq uint64, split bool) ([]bson.D, error) {
	size := bsonSize(ev)
	if size <= maxEventBytes {
		return []bson.D{ev}, nil
	}
	tooLarge := cmderr.New(cmderr.BSONObjectTooLarge, "Executor error during getMore :: caused by :: BSONObj size: %d (0x%X) is invalid. Size must be between 0 and 16793600(16MB)", size, size)
	if !split {
		return nil, tooLarge
	}
	fields := make([]bson.E, 0, len(ev))
	for _, e := range ev {
		if e.Key != "_id" {
			fields = append(fields, e)
		}
	}
	sizes := make(map[string]int, len(fields))
	for _, e := range fields {
		sizes[e.Key] = bsonSize(bson.D{e})
	}
	sort.SliceStable(fields, func(i, j int) bool { return sizes[fields[i].Key] < sizes[fields[j].Key] })
	// Each fragment carries its _id and splitEvent (about 80 bytes).
	const overhead = 128
	var frags [][]bson.E
	used := maxEventBytes
	for _, e := range fields {
		s := sizes[e.Key]
		if s+overhead > maxEventBytes {
			return nil, tooLarge // one field alone is too large to send
		}
		if used+s > maxEventBytes {
			frags, used = append(frags, nil), overhead
		}
		frags[len(frags)-1] = append(frags[len(frags)-1], e)
		used += s
	}
	out := make([]bson.D, len(frags))
	for i, f := range frags {
		d := bson.D{
			{Key: "_id", Value: fragmentToken(seq, i+1)},
			{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: int32(i + 1)}, {Key: "of", Value: int32(len(frags))}}},
		}
		out[i] = append(d, f...)
	}
	return out, nil
}
