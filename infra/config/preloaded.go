package config

// Preloaded keeps the config a plugin's LoadConfig (infra.ConfigLoader)
// decoded before any Init, for the plugin's Init. It is written by
// LoadConfig and read by Init, both on the agent's start goroutine.
type Preloaded[T any] struct{ v *T }

// Load runs load and keeps its result.
func (p *Preloaded[T]) Load(load func() (T, error)) error {
	c, err := load()
	if err != nil {
		return err
	}
	p.v = &c
	return nil
}

// Get returns what Load kept, else runs load now (a plugin started
// without the agent's LoadConfig phase, as in unit tests).
func (p *Preloaded[T]) Get(load func() (T, error)) (T, error) {
	if p.v != nil {
		return *p.v, nil
	}
	return load()
}
