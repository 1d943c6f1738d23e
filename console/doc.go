// Package console is an operator's console for the jobs of one
// jobs.Manager, in the browser: an http.Handler that a host mounts under a
// prefix of its own server, beside its application.
//
// It finds any intent (by job ID, attempt ID, owner and key, or provider
// reference), lists jobs by state, kind, provider, owner and age, tells a
// job's story on one page (its parameters and result, every attempt on a
// timeline with its last lookup, its key's chain, the operators' actions),
// lists the attempts in doubt with what the reconcilers know of them, and
// sums up each provider's outcomes, latency and verifications in charts.
// Operators resolve an attempt in doubt with evidence (succeeded with the
// provider's result, failed or cancelled), cancel a job, or have the
// reconciler look an attempt up at once: each action needs a reason,
// records who took it and why, asks for confirmation, and acts once
// however often its form is sent.
//
// The pages are rendered on the server from html/template and work
// without JavaScript; one small embedded script updates them as jobs
// change (server-sent events). The assets are embedded: there is no build
// step. Every response carries a strict Content-Security-Policy (no inline
// script or style).
//
// # Security
//
// New requires Options.Authorize, which tells who makes a request and what
// they may do (RoleViewer reads, RoleOperator acts too) and, for a host
// with many tenants, which owners' jobs they may see. There is no open
// default. Actions are POST forms protected against cross-site requests
// twice: by a token bound to the actor in each form, and by
// net/http.CrossOriginProtection.
//
// See docs/console.md for mounting, authorization, redaction, actions and
// the query plans behind the lists.
package console
