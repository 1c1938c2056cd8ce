package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// The formats "ipam checkpoint import -from" reads.
const (
	fromContiv = "contiv"
	fromAWS    = "aws-vpc-cni"
)

// checkFrom refuses a -from value that names no format.
func checkFrom(from string) error {
	switch from {
	case fromContiv, fromAWS:
		return nil
	}
	return &usageError{msg: fmt.Sprintf("ipam checkpoint import: -from %q: want %s (a contiv checkpoint, the default) or %s (the IPAM checkpoint of the AWS VPC CNI, /var/run/aws-node/ipam.json)",
		from, fromContiv, fromAWS), usage: importUsage}
}

// importDoc is a document to import: what to send (a contiv checkpoint
// document), and how to name it in errors (brief) and in the summary
// line (what).
type importDoc struct {
	send        []byte
	brief, what string
}

// importDocument decodes the document read from name (stdin: "-") in the
// format from.
func importDocument(from, name string, doc []byte) (importDoc, error) {
	shown := name
	if name == "-" {
		shown = "stdin"
	}
	if from != fromAWS {
		d, err := checkpoint.Decode(doc)
		if err != nil {
			var v struct{ Version string }
			if errors.Is(err, checkpoint.ErrInvalid) && json.Unmarshal(doc, &v) == nil && v.Version == checkpoint.AWSVersion {
				err = fmt.Errorf("%w (an AWS VPC CNI checkpoint: import it with -from %s)", err, fromAWS)
			}
			return importDoc{}, fmt.Errorf("%s: %w; nothing sent", shown, err)
		}
		return importDoc{send: doc,
			brief: fmt.Sprintf("%s (%d allocations of node %q)", shown, len(d.Allocations), d.Node),
			what:  fmt.Sprintf("%s: %d allocations of node %q, taken at %s", shown, len(d.Allocations), d.Node, d.TakenAt.Format(time.RFC3339)),
		}, nil
	}
	// The AWS file has no time of its own: its modification time is when
	// ipamd last wrote it.
	takenAt := time.Now()
	if name != "-" {
		if st, err := os.Stat(name); err == nil {
			takenAt = st.ModTime()
		}
	}
	d, err := checkpoint.DecodeAWS(doc, takenAt)
	if err != nil {
		return importDoc{}, fmt.Errorf("%s: %w; nothing sent", shown, err)
	}
	send, err := checkpoint.Encode(d)
	if err != nil {
		return importDoc{}, fmt.Errorf("%s: converting the AWS VPC CNI checkpoint: %w; nothing sent", shown, err)
	}
	return importDoc{send: send,
		brief: fmt.Sprintf("%s (%d allocations of an AWS VPC CNI checkpoint)", shown, len(d.Allocations)),
		what: fmt.Sprintf("%s: %d allocations of an AWS VPC CNI checkpoint (%s), written at %s", shown, len(d.Allocations),
			checkpoint.AWSVersion, d.TakenAt.Format(time.RFC3339)),
	}, nil
}
