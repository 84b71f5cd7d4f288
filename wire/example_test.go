package wire_test

import (
	"bytes"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/wire"
)

func Example() {
	body, _ := bson.Marshal(bson.D{{Key: "insert", Value: "people"}, {Key: "$db", Value: "test"}})
	person, _ := bson.Marshal(bson.D{{Key: "name", Value: "Ada"}})

	// Encode an OP_MSG with a document sequence and compress it.
	msg := wire.AppendMsg(nil, 1, 0, &wire.Msg{
		Body:      body,
		Sequences: []wire.DocumentSequence{{Identifier: "documents", Documents: []bson.Raw{person}}},
	})
	compressed, err := wire.AppendCompressed(nil, msg, wire.CompressorZstd, 0)
	if err != nil {
		panic(err)
	}

	// Frame it from a stream and decode it.
	framed, err := wire.ReadMessage(bytes.NewReader(compressed), nil, 0)
	if err != nil {
		panic(err)
	}
	m, err := wire.Decode(framed, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Header.OpCode, m.Compressor, wire.CommandName(m.Msg.Body), m.Msg.Sequences[0].Identifier, m.Msg.Sequences[0].Documents[0])
	// Output: OP_MSG zstd insert documents {"name": "Ada"}
}
