package cni

// The CNI error codes the agent puts in CNIReply.error_code and contiv-cni
// prints in its error JSON. Codes below 100 are the CNI spec's; 100 and
// above are ours.
const (
	// CodeInvalidNetworkConfig (spec 7): the network config is wrong.
	CodeInvalidNetworkConfig uint32 = 7
	// CodeTryAgainLater (spec 11): the agent is unreachable or not ready
	// yet (no node ID, no pod subnet).
	CodeTryAgainLater uint32 = 11
	// CodeNotAvailable (spec 50): STATUS, the agent cannot serve ADD (no
	// address is free).
	CodeNotAvailable uint32 = 50
	// CodeInternal: the agent failed (a store error, an unknown outcome).
	CodeInternal uint32 = 100
	// CodePoolExhausted: ADD, no address of the pod subnet is free.
	CodePoolExhausted uint32 = 101
	// CodeBadRequest: the request cannot be served as given (bad CNI_ARGS,
	// a bad external IPAM result, a missing container ID).
	CodeBadRequest uint32 = 102
	// CodeCheckFailed: CHECK, the key holds no address or another one than
	// prevResult says.
	CodeCheckFailed uint32 = 103
)
