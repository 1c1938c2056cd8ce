package pod

// ID identifies a pod: its name and namespace.
type ID struct {
	Name      string
	Namespace string
}

// String returns "namespace/name".
func (id ID) String() string { return id.Namespace + "/" + id.Name }

// GetID returns the ID of the pod p; the zero ID for nil.
func GetID(p *Pod) ID {
	if p == nil {
		return ID{}
	}
	return ID{Name: p.GetName(), Namespace: p.GetNamespace()}
}
