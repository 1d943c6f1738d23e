// Package jobshttp serves jobs over HTTP with the Idempotency-Key header:
// however often a client sends a request, it creates one job.
//
//	h := jobshttp.New(manager, jobshttp.Options{
//		Owner: func(r *http.Request) (string, bool) { return userFrom(r) }, // your authentication
//	})
//	h.Register(mux) // POST /jobs, GET /jobs/{id}
//
// A POST carries {"kind": …, "provider": …, "params": …} and an
// Idempotency-Key, as a structured-field string ("…", per the IETF
// httpapi-idempotency-key-header draft) or bare; both are the same key.
// Keys and jobs belong to the owner the host's Owner function names.
//
//	POST, new key                      201 Created, Location, the Receipt
//	POST, same key and request again   201 Created, same body, Idempotent-Replayed: true
//	POST, same key, other request      422 (or 409 if configured), problem naming the key's job
//	POST, same key and request again
//	      after the job failed, with
//	      Options.KeyReuse                 201 Created, a new job's Location and Receipt
//	      ... while its attempt may act    409 idempotency-key-in-use, Retry-After: 30
//	POST, no Idempotency-Key           400
//	POST, key empty, > 255 bytes,
//	      not printable ASCII          400
//	POST, not application/json         415
//	POST, malformed JSON               400
//	POST, body over MaxBodyBytes       413
//	POST, body cut off                 400
//	POST, kind/provider/params refused 422
//	no owner                           401, WWW-Authenticate
//	owner over 255 bytes, not UTF-8    401, WWW-Authenticate
//	GET /jobs/{id}                     200 with the JobView and its ETag; 404 if missing or another owner's
//	GET, If-None-Match: that ETag      304 Not Modified
//	store busy or unreachable          503, Retry-After: 1
//	store failed otherwise             500
//
// Requests racing with the same key all get the one job: the store's unique
// constraint decides, and the others are replays. A replay's body is
// byte-identical to the first response because a POST answers with a
// Receipt, which holds only what a job never changes (ID, key, kind,
// provider, params, creation time, location): the "original response" is
// the job as created, however far it has progressed since. Its current
// state is at the Location.
//
// By default a key stays bound to its job for good, failed or cancelled
// included: a client that wants to try again after a failure sends a new
// key. Options.KeyReuse lets the same request take the key back from a
// failed (or cancelled) job instead, and create a new job under it; see
// jobs.KeyReuse.
//
// # Waiting
//
// A POST or GET with Prefer: wait=N (RFC 7240) is held until the job is
// terminal or N seconds (capped by Options.MaxWait) have passed, and is
// answered with the JobView of the job as it is at that moment (an open job
// is read again when the answer is written), its ETag, Preference-Applied:
// wait=N and Content-Location. The status line stays as above. A GET's
// If-None-Match is evaluated then, so a client can hold a request open and
// get 304 if nothing changed. See jobs.Manager.Wait.
//
// # The job's state, in order
//
// Every JobView carries an ETag (a digest of its bytes: it changes exactly
// when the view does) and the job's version and attempts. GET and HEAD
// responses are Cache-Control: private, no-cache, and answer 304 to an
// If-None-Match that names the current ETag. The receipt of a POST has no
// ETag: it shows the job as created, not as it is.
//
// Responses can reach a client out of order: a request held by Prefer: wait
// may answer after a later one. A terminal state (succeeded, failed,
// cancelled) is final and never replaced; otherwise the view with the
// higher version, then the one with more attempts, is the newer (see
// JobView.Supersedes). A client that keeps the newer view ends on the job's
// latest state whatever order the responses come in.
//
// # Key retention
//
// Every response to a POST carries Idempotency-Key-Retention: the number of
// seconds after a job closes during which its key is still honoured (while
// the job is open, it always is). It defaults to the Manager's retention
// (jobs.Options.Retention, 24 hours unless set), after which Manager.Purge
// may delete the closed job: the same key then creates a new job.
//
// # Problems
//
// Every error is an RFC 9457 application/problem+json body (see Problem)
// with a stable code member, one of the Problem* names (e.g.
// idempotency-key-conflict), for programs to branch on. Its type is
// Options.ProblemBase followed by the code; by default that is the code's
// heading in this package's README.md, which documents every code.
// Problems never mention other owners' jobs.
package jobshttp
