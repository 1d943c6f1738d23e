// Package compat tests package jobs with the tools and drivers its users
// bring: goose and golang-migrate applying its migrations, and pure-Go
// SQLite without cgo. It is a module of its own, so that their
// dependencies stay out of the library's go.mod.
package compat
