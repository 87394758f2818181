package localstack

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream connects to the nats-server at url as an operator's tool would,
// to look at genq's streams from outside; done closes the connection.
func JetStream(url string) (js jetstream.JetStream, done func(), err error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	js, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}
