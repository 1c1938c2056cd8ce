// Package servicelabel gives the agent its label, the name that sets its own
// subtree in the shared key-value store ("/vnf-agent/<label>/").
//
// The label is, in order of precedence:
//  1. the value given with the UseLabel option (code, usually tests): flag
//     and environment are then ignored;
//  2. the flag -microservice-label;
//  3. the environment variable MICROSERVICE_LABEL;
//  4. the host name (os.Hostname).
//
// The caller's duties, in order:
//  1. NewPlugin(opts...); RegisterFlags(fs) before the command line is
//     parsed adds -microservice-label.
//  2. Init resolves and validates the label (non-empty, no '/', no spaces).
//  3. Read it only after Init, through ReaderAPI.
//
// The plugin has no config file and nothing to close.
package servicelabel
