package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// restTimeout bounds one REST call.
const restTimeout = 10 * time.Second

var client = &http.Client{Timeout: restTimeout}

// call sends one request and returns the status code and the body.
func call(ctx context.Context, method, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	return resp.StatusCode, body, nil
}

// GetJSON decodes the JSON answer of GET url into out; any status but
// 200 is an error that carries the body.
func GetJSON(ctx context.Context, url string, out any) error {
	code, body, err := call(ctx, http.MethodGet, url)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, code, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w in %s", url, err, body)
	}
	return nil
}

// Post sends an empty POST to url; a status outside 2xx is an error that
// carries the body.
func Post(ctx context.Context, url string) error {
	code, body, err := call(ctx, http.MethodPost, url)
	if err != nil {
		return err
	}
	if code < 200 || code > 299 {
		return fmt.Errorf("POST %s: %d %s", url, code, strings.TrimSpace(string(body)))
	}
	return nil
}

// waitReadiness polls base+"/readiness" until it answers 200.
func waitReadiness(ctx context.Context, p *Proc, base string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		code, body, err := call(ctx, http.MethodGet, base+"/readiness")
		switch {
		case err == nil && code == http.StatusOK:
			return nil
		case err == nil:
			last = fmt.Sprintf("%d %s", code, strings.TrimSpace(string(body)))
		default:
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); %s", p.Name, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s: %s/readiness not 200 within %s (last: %s); %s", p.Name, base, startTimeout, last, p.tail())
		}
	}
}
