package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"sigs.k8s.io/yaml"
)

// Decode parses YAML data into the struct that ptr points to, strictly.
// source names the data in error messages (usually the file path).
func Decode(data []byte, ptr any, source string) error {
	raw, err := parseYAML(data, source)
	if err != nil || raw == nil {
		return err // nil raw: an empty file keeps the defaults
	}
	var md mapstructure.Metadata
	d, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		TagName:  "json",
		Result:   ptr,
		Metadata: &md,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			durationHook,
			textUnmarshalerHook,
		),
	})
	if err != nil {
		return fmt.Errorf("config %s: %w", source, err)
	}
	if err := d.Decode(raw); err != nil {
		return fmt.Errorf("config %s: %w", source, cleanDecodeError(err))
	}
	if len(md.Unused) > 0 {
		sort.Strings(md.Unused)
		return fmt.Errorf("config %s: unknown key %q", source, strings.Join(md.Unused, `", "`))
	}
	return nil
}

// parseYAML checks that data is YAML (no duplicate keys) whose top level is
// a mapping, and returns that mapping; nil for an empty document.
func parseYAML(data []byte, source string) (map[string]any, error) {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: invalid YAML: %w", source, err)
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("config %s: %w", source, err)
	}
	if raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("config %s: top level must be a mapping of keys, got %T", source, raw)
	}
	return m, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// durationHook accepts durations only as strings ("5s", "100ms") or zero, so
// that a bare number is not silently taken as nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	switch v := data.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q (want a string such as \"5s\" or \"100ms\")", v)
		}
		return d, nil
	case json.Number:
		if v.String() == "0" {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("invalid duration %s (write it with a unit, such as \"%ss\")", v, v)
	}
	return data, nil
}

var textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// textUnmarshalerHook decodes strings into types such as netip.Prefix.
func textUnmarshalerHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || to.Kind() == reflect.String || !reflect.PointerTo(to).Implements(textUnmarshalerType) {
		return data, nil
	}
	v := reflect.New(to)
	if err := v.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		return nil, fmt.Errorf("invalid value %q: %w", s, err)
	}
	return v.Elem().Interface(), nil
}

// cleanDecodeError turns mapstructure's multi-error text into one line per
// problem, each naming the key.
func cleanDecodeError(err error) error {
	var de *mapstructure.DecodeError
	if errors.As(err, &de) {
		return fmt.Errorf("key %q: %w", de.Name(), de.Unwrap())
	}
	return err
}
