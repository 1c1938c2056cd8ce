// Package agentstatus is the status record that every contiv-agent
// publishes about itself in etcd and that contiv-ksr (its cluster page) and
// contiv-netctl read: the node's name and ID, the agent's REST base URL,
// whether it is ready, the fill of each of its IPAM pools, how many pod
// allocations it holds and how many of them are release candidates.
//
// The record of node n is at Key(n), that is Prefix + n, outside the KSR
// prefix (like vppnode.PresencePrefix): the agent of n is its only writer;
// it writes the key after its first resync, again every PeriodSeconds (and
// sooner when its readiness changes), and deletes it when it stops cleanly.
// Readers never write these keys. Callers:
//
//  1. build keys only with Key and read them only with ParseKey, which
//     rejects keys outside Prefix, empty names and names with "/";
//  2. encode only with Encode and decode only with Decode: Decode is
//     strict (unknown or misspelt fields, wrong JSON types, trailing data
//     and values that break the rules of Validate are errors naming the
//     field and the value), so a reader never shows a half-understood
//     record;
//  3. judge freshness only with Stale: a record whose agent stopped
//     without deleting it (crash, lost etcd) stays in etcd; Updated older
//     than three periods means the agent is not publishing.
//
// The record carries Version 1. A reader that meets another version
// refuses the record (Decode's error says so) rather than guess.
package agentstatus
