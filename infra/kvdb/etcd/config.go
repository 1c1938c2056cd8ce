package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/internal/embedded"
)

// EnvEndpoints names the environment variable (a comma-separated list)
// used for endpoints when etcd.conf gives none and embedded is off.
const EnvEndpoints = "ETCD_ENDPOINTS"

// Config is the content of etcd.conf.
type Config struct {
	// Endpoints are the etcd servers, as host:port or http(s)://host:port.
	Endpoints []string `json:"endpoints"`
	// DialTimeout bounds the connection probe at Init and each health probe.
	DialTimeout time.Duration `json:"dial-timeout"`
	// OperationTimeout bounds every request (and the setup of a watch).
	OperationTimeout time.Duration `json:"operation-timeout"`
	// InsecureTransport disables TLS even if certificate files are set.
	InsecureTransport bool `json:"insecure-transport"`
	// InsecureSkipTLSVerify accepts any server certificate.
	InsecureSkipTLSVerify bool `json:"insecure-skip-tls-verify"`
	// CertFile and KeyFile are the client certificate; CAFile verifies the
	// server. TLS is used when any of them is set or an endpoint is https.
	CertFile string `json:"cert-file"`
	KeyFile  string `json:"key-file"`
	CAFile   string `json:"ca-file"`
	// AllowDelayedStart lets Init succeed while etcd is unreachable; the
	// plugin keeps retrying every ReconnectInterval.
	AllowDelayedStart bool `json:"allow-delayed-start"`
	// ReconnectInterval is the retry period while disconnected (also the
	// longest back-off of the client's reconnection).
	ReconnectInterval time.Duration `json:"reconnect-interval"`
	// ProbeInterval is the health probe period while connected.
	ProbeInterval time.Duration `json:"probe-interval"`
	// SessionTTL is the lease TTL of sessions made by NewSession (whole
	// seconds, at least 1s).
	SessionTTL time.Duration `json:"session-ttl"`
	// AutoCompact is the period of automatic compaction to the current
	// revision; 0 turns it off.
	AutoCompact time.Duration `json:"auto-compact"`
	// ResyncAfterReconnect makes a failed probe followed by a successful
	// one call the OnReconnect callbacks.
	ResyncAfterReconnect bool `json:"resync-after-reconnect"`
	// Embedded runs an in-process etcd server; it is also chosen when there
	// are no endpoints at all.
	Embedded bool `json:"embedded"`
	// EmbeddedDataDir is the embedded server's data directory.
	EmbeddedDataDir string `json:"embedded-data-dir"`
	// EmbeddedClientURL and EmbeddedPeerURL are where the embedded server
	// listens: http on a loopback IP only.
	EmbeddedClientURL string `json:"embedded-client-url"`
	EmbeddedPeerURL   string `json:"embedded-peer-url"`
}

// DefaultConfig returns the configuration that etcd.conf is decoded over.
func DefaultConfig() Config {
	return Config{
		DialTimeout:          time.Second,
		OperationTimeout:     3 * time.Second,
		ReconnectInterval:    2 * time.Second,
		ProbeInterval:        5 * time.Second,
		SessionTTL:           5 * time.Second,
		ResyncAfterReconnect: true,
		EmbeddedDataDir:      "_data/etcd",
		EmbeddedClientURL:    "http://127.0.0.1:2379",
		EmbeddedPeerURL:      "http://127.0.0.1:2380",
	}
}

// Normalize applies the endpoint rules: blank entries are dropped; with no
// endpoints in the file and embedded off, env ETCD_ENDPOINTS (comma list)
// fills them; still none means embedded. lookupEnv may be nil (no env).
func (c *Config) Normalize(lookupEnv func(string) (string, bool)) {
	c.Endpoints = splitList(c.Endpoints...)
	if len(c.Endpoints) == 0 && !c.Embedded && lookupEnv != nil {
		if v, ok := lookupEnv(EnvEndpoints); ok {
			c.Endpoints = splitList(v)
		}
	}
	if len(c.Endpoints) == 0 {
		c.Embedded = true
	}
}

// splitList splits comma lists, trims spaces and drops empty entries.
func splitList(items ...string) []string {
	var out []string
	for _, item := range items {
		for _, s := range strings.Split(item, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// Validate checks every key; each error names the key and the bad value.
// Call Normalize first.
func (c *Config) Validate() error {
	errs := c.validateTimes()
	for _, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			errs = append(errs, fmt.Errorf("endpoints: %w", err))
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("cert-file %q and key-file %q: set both or neither", c.CertFile, c.KeyFile))
	}
	if c.Embedded {
		errs = append(errs, c.validateEmbedded()...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("etcd config: %w", errors.Join(errs...))
	}
	return nil
}

func (c *Config) validateTimes() []error {
	var errs []error
	positive := []struct {
		key string
		d   time.Duration
	}{
		{"dial-timeout", c.DialTimeout}, {"operation-timeout", c.OperationTimeout},
		{"reconnect-interval", c.ReconnectInterval}, {"probe-interval", c.ProbeInterval},
	}
	for _, p := range positive {
		if p.d <= 0 {
			errs = append(errs, fmt.Errorf("%s: %s, want more than 0", p.key, p.d))
		}
	}
	if c.SessionTTL < time.Second {
		errs = append(errs, fmt.Errorf("session-ttl: %s, want at least 1s", c.SessionTTL))
	}
	if c.AutoCompact < 0 {
		errs = append(errs, fmt.Errorf("auto-compact: %s is negative (0 turns it off)", c.AutoCompact))
	}
	return errs
}

func (c *Config) validateEmbedded() []error {
	var errs []error
	if len(c.Endpoints) > 0 {
		errs = append(errs, fmt.Errorf("embedded: true conflicts with endpoints %q (the embedded server is the endpoint)", c.Endpoints))
	}
	if strings.TrimSpace(c.EmbeddedDataDir) == "" {
		errs = append(errs, errors.New("embedded-data-dir: must not be empty"))
	}
	if err := embedded.CheckLoopback(c.EmbeddedClientURL); err != nil {
		errs = append(errs, fmt.Errorf("embedded-client-url: %w", err))
	}
	if err := embedded.CheckLoopback(c.EmbeddedPeerURL); err != nil {
		errs = append(errs, fmt.Errorf("embedded-peer-url: %w", err))
	}
	if c.EmbeddedClientURL == c.EmbeddedPeerURL && !strings.HasSuffix(c.EmbeddedClientURL, ":0") {
		errs = append(errs, fmt.Errorf("embedded-client-url and embedded-peer-url: both are %q", c.EmbeddedClientURL))
	}
	if c.CertFile != "" || c.CAFile != "" {
		errs = append(errs, errors.New("cert-file, key-file, ca-file: not used with the embedded server (plain http on loopback)"))
	}
	return errs
}

// checkEndpoint accepts host:port and http(s)://host:port.
func checkEndpoint(ep string) error {
	hostPort := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("%q is not host:port or http(s)://host:port", ep)
		}
		hostPort = u.Host
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port or http(s)://host:port", ep)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: invalid port %q", ep, port)
	}
	return nil
}

// usesTLS reports whether the client talks TLS: not with the embedded
// server or insecure-transport; else when a certificate file or
// insecure-skip-tls-verify is set or an endpoint is https.
func (c *Config) usesTLS() bool {
	if c.InsecureTransport || c.Embedded {
		return false
	}
	https := false
	for _, ep := range c.Endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	return c.CertFile != "" || c.CAFile != "" || c.InsecureSkipTLSVerify || https
}

// tlsConfig builds the client TLS configuration, nil for plain text.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if !c.usesTLS() {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile}
	tc, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS (cert-file %q, key-file %q, ca-file %q): %w", c.CertFile, c.KeyFile, c.CAFile, err)
	}
	tc.InsecureSkipVerify = c.InsecureSkipTLSVerify
	return tc, nil
}
