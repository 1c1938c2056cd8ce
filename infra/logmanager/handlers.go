package logmanager

import (
	"net/http"

	"github.com/contiv-ipam/agent/infra/rest"
)

// REST paths served by the plugin.
const (
	ListPath     = "/log/list"
	SetLevelPath = "/log/{logger}/{level}"
)

func (p *Plugin) registerHandlers() {
	rest.RegisterDescribed(p.HTTP, ListPath, "every logger and its level", p.listHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, SetLevelPath, "set a logger's level (\"default\": loggers created later)",
		p.setLevelHandler, http.MethodPut)
}

func (p *Plugin) listHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		f.JSON(w, http.StatusOK, p.ListLoggers())
	}
}

func (p *Plugin) setLevelHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, err := p.SetLevel(r.PathValue("logger"), r.PathValue("level"))
		if err != nil {
			f.Error(w, http.StatusBadRequest, err)
			return
		}
		f.JSON(w, http.StatusOK, got)
	}
}
