// Package resttest runs a real REST plugin for tests of plugins that serve
// endpoints.
//
// How a test uses it, in order:
//  1. srv := resttest.New(t) builds a rest plugin on 127.0.0.1:0 with a
//     logger that discards its output, runs Init and AfterInit, and
//     registers t.Cleanup to close it.
//  2. Wire srv.Plugin into the plugin under test as its HTTPHandlers
//     dependency and run that plugin's Init/AfterInit; registering after
//     the server started is allowed.
//  3. Call srv.Get, srv.Put, srv.Post or srv.Do from the test goroutine;
//     they fail the test on transport errors and return status and body.
//
// Authentication: pass rest.UseConf(c) with c from Config() and
// client-basic-auth set, and send BasicAuth(user, pass) as Do's header.
// For mutual TLS, pki := NewPKI(t) makes a CA, a server certificate for
// 127.0.0.1 and their files; rest.UseConf(pki.MutualTLS(Config())) serves
// HTTPS and requires client certificates (403 without one, except on the
// probe paths, rest.ProbePaths), and srv.WithClient(pki.Client(cn)) sends
// with a certificate of subject common name cn; pki.Client("") sends none.
package resttest
