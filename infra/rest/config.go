package rest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is where the server listens when the config names no
// endpoint: loopback only, so that nothing is exposed by accident.
const DefaultEndpoint = "127.0.0.1:9999"

// Config is the content of http.conf. Every key is optional.
type Config struct {
	// Disabled turns the server off: handlers are recorded but never served.
	Disabled bool `json:"disabled"`
	// Endpoint is the host:port to listen on; port 0 picks a free port.
	Endpoint string `json:"endpoint"`
	// ReadTimeout bounds reading a whole request, body included (0: none).
	ReadTimeout time.Duration `json:"read-timeout"`
	// ReadHeaderTimeout bounds reading the request headers (0: ReadTimeout).
	ReadHeaderTimeout time.Duration `json:"read-header-timeout"`
	// WriteTimeout bounds writing a response (0: none).
	WriteTimeout time.Duration `json:"write-timeout"`
	// IdleTimeout bounds how long a keep-alive connection waits (0: ReadTimeout).
	IdleTimeout time.Duration `json:"idle-timeout"`
	// MaxHeaderBytes caps the size of the request headers.
	MaxHeaderBytes int `json:"max-header-bytes"`
	// ShutdownTimeout bounds the graceful shutdown in Close.
	ShutdownTimeout time.Duration `json:"shutdown-timeout"`
	// ServerCertFile and ServerKeyFile (PEM) turn on HTTPS; set both or neither.
	ServerCertFile string `json:"server-cert-file"`
	ServerKeyFile  string `json:"server-key-file"`
	// ClientCertFiles are CA certificates (PEM); when set, every client must
	// present a certificate signed by one of them. Requires HTTPS.
	ClientCertFiles []string `json:"client-cert-files"`
	// ClientBasicAuth lists "user:password" pairs; when set, every request
	// must carry one of them as HTTP basic authentication.
	ClientBasicAuth []string `json:"client-basic-auth"`
	// AdvertiseURL is the base URL at which other machines reach this
	// server (http[s]://host[:port][/path]), as the agent publishes it in
	// its status record; "" derives it from the endpoint (see
	// Plugin.AdvertiseURL). Set it when the server is behind a proxy or
	// NAT, or listens on every interface of a node with several addresses.
	AdvertiseURL string `json:"advertise-url"`
}

// DefaultConfig returns the configuration used for keys the file leaves out.
func DefaultConfig() Config {
	return Config{
		Endpoint:          DefaultEndpoint,
		ReadTimeout:       30 * time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    http.DefaultMaxHeaderBytes,
		ShutdownTimeout:   5 * time.Second,
	}
}

// TLS reports whether the server uses HTTPS.
func (c *Config) TLS() bool { return c.ServerCertFile != "" && c.ServerKeyFile != "" }

// Validate checks every key and returns one error per broken rule, each
// naming the key and the offending value. Passwords are never quoted.
func (c *Config) Validate() error {
	var errs []error
	if err := validateEndpoint(c.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint %q: %w", c.Endpoint, err))
	}
	durations := []struct {
		key string
		val time.Duration
	}{
		{"read-timeout", c.ReadTimeout},
		{"read-header-timeout", c.ReadHeaderTimeout},
		{"write-timeout", c.WriteTimeout},
		{"idle-timeout", c.IdleTimeout},
		{"shutdown-timeout", c.ShutdownTimeout},
	}
	for _, d := range durations {
		if d.val < 0 {
			errs = append(errs, fmt.Errorf("%s %q: must not be negative", d.key, d.val))
		}
	}
	if c.MaxHeaderBytes < 0 {
		errs = append(errs, fmt.Errorf("max-header-bytes %d: must not be negative", c.MaxHeaderBytes))
	}
	errs = append(errs, c.validateTLS()...)
	if err := validateAdvertiseURL(c.AdvertiseURL); err != nil {
		errs = append(errs, fmt.Errorf("advertise-url %q: %w", c.AdvertiseURL, err))
	}
	for i, entry := range c.ClientBasicAuth {
		if _, _, err := splitCredentials(entry); err != nil {
			errs = append(errs, fmt.Errorf("client-basic-auth[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) validateTLS() []error {
	var errs []error
	switch {
	case c.ServerCertFile != "" && c.ServerKeyFile == "":
		errs = append(errs, fmt.Errorf("server-cert-file %q is set but server-key-file is empty", c.ServerCertFile))
	case c.ServerKeyFile != "" && c.ServerCertFile == "":
		errs = append(errs, fmt.Errorf("server-key-file %q is set but server-cert-file is empty", c.ServerKeyFile))
	}
	if len(c.ClientCertFiles) > 0 && !c.TLS() {
		errs = append(errs, fmt.Errorf("client-cert-files %q need HTTPS: set server-cert-file and server-key-file",
			c.ClientCertFiles))
	}
	for i, f := range c.ClientCertFiles {
		if strings.TrimSpace(f) == "" {
			errs = append(errs, fmt.Errorf("client-cert-files[%d]: empty file name", i))
		}
	}
	return errs
}

// validateEndpoint accepts host:port with a numeric port in 0..65535 and an
// empty host, an IP address or a host name.
func validateEndpoint(endpoint string) error {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if _, err := parsePort(port); err != nil {
		return err
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("invalid host %q", host)
	}
	return nil
}

// validateAdvertiseURL accepts "" or an absolute http or https URL with a
// host, without user info, query or fragment.
func validateAdvertiseURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("must not hold user info")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return errors.New("must not hold a query or a fragment")
	}
	if port := u.Port(); port != "" {
		if _, err := parsePort(port); err != nil {
			return err
		}
	}
	return nil
}

// parsePort parses a TCP port number, 0 included.
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q (want 0..65535)", s)
	}
	return n, nil
}

// onAllInterfaces reports whether the endpoint's host is empty or an
// unspecified address (0.0.0.0, ::): the server is then reachable on every
// interface of the node.
func (c *Config) onAllInterfaces() bool {
	host, _, err := net.SplitHostPort(c.Endpoint)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// withPort replaces the port of a host:port endpoint.
func withPort(endpoint, port string) (string, error) {
	if _, err := parsePort(port); err != nil {
		return "", err
	}
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: want host:port: %w", endpoint, err)
	}
	return net.JoinHostPort(host, port), nil
}

// splitCredentials splits a "user:password" entry. The error never contains
// the password.
func splitCredentials(entry string) (user, pass string, err error) {
	user, pass, ok := strings.Cut(entry, ":")
	switch {
	case !ok:
		return "", "", errors.New(`want "user:password", the entry has no ':'`)
	case user == "":
		return "", "", errors.New(`want "user:password", the user name is empty`)
	case pass == "":
		return "", "", fmt.Errorf(`want "user:password", user %q has an empty password`, user)
	}
	return user, pass, nil
}
