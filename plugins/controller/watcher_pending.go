package controller

import "errors"

func (p *Plugin) newWatcher() (stateWatcher, error) { return nil, errors.New("pending") }
