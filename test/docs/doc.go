// Package docs holds the docs to the code and to themselves, so that they
// cannot drift quietly: the README stays a front page, every route the api
// registers is named in docs/api.md, and no relative link in the README or
// docs/ points at nothing. Its tests read files only, so they take
// milliseconds under a plain go test ./...
package docs
