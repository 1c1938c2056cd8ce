package servicelabel

// AllAgentsPrefix is the key prefix under which every agent owns a subtree.
const AllAgentsPrefix = "/vnf-agent/"

// ReaderAPI tells a plugin which agent it runs in. Call it after the
// servicelabel plugin's Init.
type ReaderAPI interface {
	// GetAgentLabel returns this agent's label.
	GetAgentLabel() string
	// GetAgentPrefix returns this agent's key prefix: "/vnf-agent/<label>/".
	GetAgentPrefix() string
	// GetDifferentAgentPrefix returns the key prefix of the agent called
	// label: "/vnf-agent/<label>/".
	GetDifferentAgentPrefix(label string) string
	// GetAllAgentsPrefix returns the prefix of every agent: "/vnf-agent/".
	GetAllAgentsPrefix() string
}
