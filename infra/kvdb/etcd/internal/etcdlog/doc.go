// Package etcdlog routes the zap logs of the etcd client and of the
// embedded etcd server into a *slog.Logger, so that etcd's messages carry
// the plugin's logger name and follow its level.
//
// Caller duties:
//  1. Build one logger per component with New(log, min), choosing min so
//     that etcd's chatty info records stay out (warn for the server, error
//     for the client, whose retries log warnings while the server is down).
//  2. Pass it as clientv3.Config.Logger or, through
//     embed.NewZapLoggerBuilder, as the embedded server's logger.
package etcdlog
