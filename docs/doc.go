// Package docs holds Carmy's documentation (the Markdown pages beside this
// file) and TestDocs, which runs the shell blocks of the README's
// walk-through, of cluster.md and of examples/README.md against a freshly
// built carmy, so that the commands the documentation shows keep working.
package docs
