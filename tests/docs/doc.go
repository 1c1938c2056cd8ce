// Package docs checks the documentation as a reader meets it: README.md,
// the short entry point, stays within 400 lines; every relative link of
// README.md and docs/*.md reaches a file of the repository and, for an
// #anchor, a heading of the page it names (GitHub's slugs); every page of
// docs/ is reachable from the index; no page names an issue number (user
// docs speak of features); and docs/configuration.md still states the
// lookup order that infra/config's TestLookupOrder pins.
//
// The checks that tie the pages to the code live beside the code:
// cmd/contiv-agent's TestConfigurationDocDocumentsEveryConfigKey (every
// config key in docs/configuration.md) and checkDocsListEndpoints (every
// endpoint of the agent's index in docs/rest-api.md).
//
// Owner: the package holds only tests; each reads the files and shares
// nothing mutable.
package docs
