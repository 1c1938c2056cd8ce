package agent

import (
	"fmt"
	"reflect"

	"github.com/contiv-ipam/agent/infra"
)

var pluginType = reflect.TypeOf((*infra.Plugin)(nil)).Elem()

// lookup lists the plugins reachable from roots, dependencies first.
type lookup struct {
	seen   map[infra.Plugin]bool
	byName map[string]infra.Plugin
	list   []infra.Plugin
	err    error
}

// findPlugins walks roots as the package doc describes.
func findPlugins(roots []infra.Plugin) ([]infra.Plugin, error) {
	l := &lookup{seen: map[infra.Plugin]bool{}, byName: map[string]infra.Plugin{}}
	for i, p := range roots {
		v := reflect.ValueOf(p)
		if p == nil || v.Kind() != reflect.Pointer || v.IsNil() {
			return nil, fmt.Errorf("top-level plugin #%d (%T) must be a non-nil pointer", i, p)
		}
		l.visit(v)
	}
	return l.list, l.err
}

// listPlugins checks an explicit list for nil entries and duplicate names.
func listPlugins(plugins []infra.Plugin) ([]infra.Plugin, error) {
	l := &lookup{seen: map[infra.Plugin]bool{}, byName: map[string]infra.Plugin{}}
	for i, p := range plugins {
		v := reflect.ValueOf(p)
		if p == nil || v.Kind() != reflect.Pointer || v.IsNil() {
			return nil, fmt.Errorf("plugin #%d (%T) of the list must be a non-nil pointer", i, p)
		}
		l.add(p)
	}
	return l.list, l.err
}

// visit handles one value that may hold a plugin.
func (l *lookup) visit(v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			l.visit(v.Elem())
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type().Implements(pluginType) {
			l.visitPlugin(v)
		}
	case reflect.Struct:
		if v.CanAddr() && v.Addr().Type().Implements(pluginType) {
			l.visitPlugin(v.Addr())
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			l.visit(v.Index(i))
		}
	}
}

// visitPlugin lists p after everything its fields reach.
func (l *lookup) visitPlugin(v reflect.Value) {
	p := v.Interface().(infra.Plugin)
	if l.seen[p] {
		return
	}
	l.seen[p] = true
	if elem := v.Elem(); elem.Kind() == reflect.Struct {
		l.walkFields(elem)
	}
	l.add(p)
}

// walkFields visits the exported fields of a struct and walks through its
// anonymous struct fields (Deps, infra.PluginDeps, groups of plugins).
func (l *lookup) walkFields(s reflect.Value) {
	t := s.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		fv := s.Field(i)
		if f.Anonymous {
			l.walkEmbedded(fv)
			continue
		}
		if f.IsExported() {
			l.visit(fv)
		}
	}
}

// walkEmbedded walks through an embedded struct (or pointer to one): its
// exported fields are promoted, whether or not its type is exported. An
// embedded plugin is the outer plugin itself, not a dependency: skipped.
func (l *lookup) walkEmbedded(fv reflect.Value) {
	if fv.Kind() == reflect.Pointer {
		if fv.IsNil() || fv.Type().Implements(pluginType) {
			return
		}
		fv = fv.Elem()
	}
	if fv.Kind() == reflect.Struct && !isPluginStruct(fv) {
		l.walkFields(fv)
	}
}

func isPluginStruct(v reflect.Value) bool {
	return v.CanAddr() && v.Addr().Type().Implements(pluginType)
}

// add appends p unless another plugin already uses its name.
func (l *lookup) add(p infra.Plugin) {
	name := p.String()
	if other, ok := l.byName[name]; ok {
		if other != p && l.err == nil {
			l.err = fmt.Errorf("two different plugins are named %q (%T and %T)", name, other, p)
		}
		return
	}
	l.byName[name] = p
	l.list = append(l.list, p)
}
