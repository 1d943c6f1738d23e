/*
 * jobs.pml: a model of the jobs protocol (github.com/intentjobs/jobs) for SPIN.
 * Run it with model/check.sh; model/README.md explains what it proves.
 *
 * One owner+key intent. Over time at most NJ jobs hold that key (a new job
 * takes it by key reuse, Store.ReplaceJob, or after a purge), with at most
 * MAXPERJOB attempts per job and NA attempts in all. Each attempt sends at
 * most one request to the provider.
 *
 * Every store operation is ONE atomic step (a d_step), as the guarded SQL
 * statements are (one statement, or one transaction under the row locks or
 * SQLite's write lock). What an actor does between two store calls (a
 * provider call, a decision on what it read) is a separate step: every
 * other actor can run in between. An actor's purely local bookkeeping is
 * folded into the store step next to it, since no one else can see it.
 *
 * Actors (processes; how many of each run is set per configuration):
 *   Client        Manager.Submit with KeyReuseAfterFailureOrCancel, any number of times
 *   Worker        Runner.Run (runner.go): StartAttempt, Provider.Call, MarkRunning on
 *                 the acknowledgement, Complete / Fail / MarkUnknown; failover to a
 *                 verified fallback; hedging (-DHEDGE); AbandonLosers (-DABANDON_LOSERS)
 *   Reconciler    Reconciler.ReconcileOnce (reconciler.go): claim a stale attempt with
 *                 a lease, Provider.Lookup, record the answer with the claim's token
 *   Operator      CancelJob, FailJob, Purge, and resolving an attempt with evidence
 *   Env           the provider acting on requests, and the clock ending leases
 *
 * Crashes: a worker or a reconciler may crash after any step: its local state
 * is lost and it starts over (a new Run of a delivered job ID, a new pass).
 * The durable state (the global variables below) is never touched by a crash.
 * Crashing between two local steps is the same as crashing after the last
 * step that others could see, so crash points follow each visible step.
 *
 * Properties (each enabled by -DCHK_Pn; SPIN's report names the one that fails):
 *   P1_never_twice       no request is sent while an earlier request of the intent may
 *                        have acted, by what the database says; and the provider never
 *                        acts on two requests of the intent (with hedging: of two jobs)
 *   P2_one_result        at most one attempt of a job succeeds; completed_by is set once
 *   P3_no_lost_write     a terminal job or attempt never changes again (purge removes it)
 *   P4_evidence_resolves a reconciler or operator that recorded the provider's final
 *                        answer leaves the attempt out of doubt (bounded); with -DLIVE,
 *                        the LTL claim p4: a settled request's attempt eventually leaves
 *                        doubt, under weak fairness
 *   P5_key_free_safe     when reuse binds the key to a new job, no attempt of the old job
 *                        is open and none of its requests acted or can still act; purge
 *                        removes no job with an open attempt
 *   P6_claim_holds       a reconciler's write is accepted only while no other reconciler
 *                        holds a live claim on the attempt
 *
 * Broken variants, each of which check.sh requires to be caught:
 *   -DBROKEN_REUSE_GUARD  ReplaceJob looks at the old job's state only
 *   -DBROKEN_CAS          Complete without the version / winner / state guard
 *   -DBROKEN_INDOUBT      CreateAttempt not refused while an attempt is unknown
 *   -DBROKEN_PURGE        PurgeJobs ignores open attempts
 *   -DBROKEN_CLAIM        a reconciler's write with a taken-over claim is accepted
 *   -DBROKEN_ABANDON      AbandonLosers as before commit 8424a84 (with -DABANDON_LOSERS)
 */

#ifndef NJ
#define NJ 2            /* job slots over time (jobs under the one key) */
#endif
#ifndef NA
#define NA 3            /* attempt slots over time, all jobs together */
#endif
#ifndef MAXPERJOB
#define MAXPERJOB 3     /* attempts per job */
#endif
#ifndef NWORKERS
#define NWORKERS 1
#endif
#ifndef NRECON
#define NRECON 1
#endif
#if NWORKERS >= 2
#define PRECHECK true   /* Runner.Run returns at once if an attempt is open */
#else
#define PRECHECK false  /* one worker stands for every caller of StartAttempt, each Run
                           of a Runner (whose check of the attempts may be stale) included */
#endif
#if NRECON >= 2
#define LEASES          /* claims and leases matter only between reconcilers */
#endif

/* ------------------------------------------------------------------------
 * Values. One mtype so that trails print names. Job states, attempt states,
 * the provider's truth about a request, lookup answers, and store answers.
 * ------------------------------------------------------------------------ */
mtype = {
	pending, running, succeeded, failed, cancelled, purged,     /* intentjobs_jobs.state (purged: row deleted) */
	starting, unknown, lost,                                    /* intentjobs_attempts.state, with running, succeeded, failed, cancelled, purged */
	acted, refused, fenced,                                     /* the provider's truth about one request (0: has not acted yet) */
	o_pending, o_done, o_failed, o_notfound,                    /* Provider.Lookup answers (OutcomeState) */
	ok, e_inflight, e_closed, e_lostrace, e_transition,         /* store answers: nil, ErrAttemptInFlight, ErrJobClosed, ErrLostRace, ErrInvalidTransition, */
	e_claimlost, e_notfound, e_claimed, e_bound                 /* ErrClaimLost, ErrNotFound, claim not taken, model bound reached */
};

/* ------------------------------------------------------------------------
 * Durable state: the database (tables intentjobs_jobs and intentjobs_attempts).
 * Job and attempt IDs are 1-based slot numbers; 0 means none / NULL.
 * ------------------------------------------------------------------------ */
mtype jstate[NJ+1];     /* intentjobs_jobs.state; 0: slot unused */
byte  jver[NJ+1];       /* intentjobs_jobs.version */
byte  jcb[NJ+1];        /* jobs.completed_by: the winning attempt, 0 = NULL */
byte  jn[NJ+1];         /* jobs.attempt_count */
byte  holder;           /* the job whose idempotency_key is the live key; 0 = key free.
                           A job that is not the holder and not purged holds a retired key. */
byte  njobs;            /* job slots used so far */

mtype astate[NA+1];     /* intentjobs_attempts.state; 0: slot unused */
byte  ajob[NA+1];       /* intentjobs_attempts.job_id */
byte  abase[NA+1];      /* intentjobs_attempts.base_version */
bit   aprov[NA+1];      /* intentjobs_attempts.provider: 0 the job's target, 1 a verified fallback (failover) */
byte  aclaim[NA+1];     /* intentjobs_attempts.claim_token: the reconciler's id, 0 = never claimed */
bit   alease[NA+1];     /* claimed_until > now: the claim's lease runs */
bit   adrop[NA+1];      /* a result of this attempt was delivered and dropped (lost, or
                           cancelled because its job was closed): the provider acted */
byte  natt;             /* attempt slots used so far */

/* ------------------------------------------------------------------------
 * The provider: an external system. One request per attempt (its
 * idempotency key is the attempt's ID, Attempt.ProviderKey).
 * ------------------------------------------------------------------------ */
bit   sent[NA+1];       /* the attempt's request was sent (Provider.Call) */
mtype prov[NA+1];       /* 0: has not acted (yet); acted (done, e.g. charged); refused
                           (definitively failed); fenced (never arrived, and never will:
                           a late request with the key is refused) */

/* ------------------------------------------------------------------------
 * Ghost state, for the properties only (never read by the protocol).
 * ------------------------------------------------------------------------ */
bit   forgot[NA+1];     /* the request's job was purged, its attempt closed: the
                           retention ended the intent (P1) */
byte  g_cb[NJ+1];       /* first completed_by written (P2) */
mtype g_jterm[NJ+1];    /* first terminal state of each job (P3) */
mtype g_aterm[NA+1];    /* first terminal state of each attempt (P3) */

#ifdef LIVE
byte early;             /* leases that ended while their holder was still at work (LIVE) */
bit  busy[NA+1];        /* a reconciler holds the claim and has not written yet (LIVE) */
#endif

byte gi, gk, gn, gm;    /* scratch for loops inside one atomic step; always 0 between steps */
/* The properties' verdicts, named so that SPIN's report names the one that
 * failed ("assertion violated P1_never_twice"). Always 1 between steps. */
byte P1_never_twice = 1, P2_one_result = 1, P3_no_lost_write = 1, P4_evidence_resolves = 1,
     P5_key_free_safe = 1, P6_claim_holds = 1;

#ifdef LEASES
#define NOT_LEASED(a) (!alease[a])
#else
#define NOT_LEASED(a) (true)
#endif
/* A terminal attempt is never claimed or written again: its claim no longer
 * matters, and is cleared to keep the search small. */
#if defined(LEASES) && defined(LIVE)
#define RELEASE(a) aclaim[a] = 0; alease[a] = 0; busy[a] = 0
#elif defined(LEASES)
#define RELEASE(a) aclaim[a] = 0; alease[a] = 0
#else
#define RELEASE(a) skip
#endif

#define OPEN(a)     (astate[a] == starting || astate[a] == running || astate[a] == unknown)
#define INDOUBT(a)  (astate[a] == starting || astate[a] == unknown)
#define JLIVE(j)    (jstate[j] == pending || jstate[j] == running)
#define JTERM(j)    (jstate[j] == succeeded || jstate[j] == failed || jstate[j] == cancelled)
#define ATERM(a)    (astate[a] == succeeded || astate[a] == lost || astate[a] == failed || astate[a] == cancelled)
/* what the database knows: the request did not act and never will */
#define KNOWN_NOT_ACTED(b) (astate[b] == failed || (astate[b] == cancelled && !adrop[b]))

/* ------------------------------------------------------------------------
 * Property checks.
 * ------------------------------------------------------------------------ */

/* P2 and P3: invariants of the durable state, checked at the end of every
 * store step (the only steps that change it). */
inline CHECK_STORE() {
#if defined(CHK_P2) || defined(CHK_P3)
	for (gi : 1 .. NJ) {
#ifdef CHK_P2
		gn = 0;
		for (gk : 1 .. NA) {
			if
			:: ajob[gk] == gi && astate[gk] == succeeded -> gn++
			:: else
			fi
		}
		P2_one_result = (gn <= 1) && (g_cb[gi] == 0 || jcb[gi] == g_cb[gi] || jstate[gi] == purged);
		assert(P2_one_result);
		if
		:: g_cb[gi] == 0 -> g_cb[gi] = jcb[gi]
		:: else
		fi;
#endif
#ifdef CHK_P3
		P3_no_lost_write = (g_jterm[gi] == 0 || jstate[gi] == g_jterm[gi] || jstate[gi] == purged);
		assert(P3_no_lost_write);
		if
		:: g_jterm[gi] == 0 && JTERM(gi) -> g_jterm[gi] = jstate[gi]
		:: else
		fi;
#endif
	}
#endif
#ifdef CHK_P3
	for (gk : 1 .. NA) {
		P3_no_lost_write = (g_aterm[gk] == 0 || astate[gk] == g_aterm[gk] || astate[gk] == purged);
		assert(P3_no_lost_write);
		if
		:: g_aterm[gk] == 0 && ATERM(gk) -> g_aterm[gk] = astate[gk]
		:: else
		fi
	}
#endif
	gi = 0; gk = 0; gn = 0
}

/* With hedging the user opted in to two requests of one job: P1 then
 * compares only requests of different jobs under the key. */
#ifdef HEDGE
#define P1_SCOPE(b, a) (ajob[b] != ajob[a])
#else
#define P1_SCOPE(b, a) (true)
#endif

/* P1 at the moment request a is sent: every earlier request of the intent
 * (of every job under the key) is known, in the database, not to have acted.
 * A request whose key the provider has fenced is refused on arrival: sending
 * it asks nothing (see the report: a worker paused between StartAttempt and
 * the call can send a request that a reconciler has already cancelled). */
inline CHECK_P1_SEND(a) {
#ifdef CHK_P1
	gn = 0;
	if
	:: prov[a] != fenced ->
		for (gk : 1 .. NA) {
			if
			:: gk != a && P1_SCOPE(gk, a) && sent[gk] && !forgot[gk] && !KNOWN_NOT_ACTED(gk) -> gn++
			:: else
			fi
		}
	:: else
	fi;
	P1_never_twice = (gn == 0);
	assert(P1_never_twice);
	gk = 0; gn = 0
#else
	skip
#endif
}

/* P1 at the moment the provider acts on request a: no other request of the
 * intent has acted (the user is charged once). */
inline CHECK_P1_ACT(a) {
#ifdef CHK_P1
	gn = 0;
	for (gk : 1 .. NA) {
		if
		:: gk != a && P1_SCOPE(gk, a) && prov[gk] == acted && !forgot[gk] -> gn++
		:: else
		fi
	}
	P1_never_twice = (gn == 0);
	assert(P1_never_twice);
	gk = 0; gn = 0
#else
	skip
#endif
}

/* P5 when key reuse binds the key to a new job: no attempt of the old job is
 * open, and none of its requests acted or can still act (the provider's
 * truth, not what the database says). */
inline CHECK_P5_REUSE(old) {
#ifdef CHK_P5
	gn = 0;
	for (gk : 1 .. NA) {
		if
		:: ajob[gk] == old && (OPEN(gk) || !(prov[gk] == refused || prov[gk] == fenced)) -> gn++
		:: else
		fi
	}
	P5_key_free_safe = (gn == 0);
	assert(P5_key_free_safe);
	gk = 0; gn = 0
#else
	skip
#endif
}

/* P5 when purge removes a job: no attempt of it is open. (Its requests may
 * have acted: retention ends the intent, as documented, and the next Submit
 * of the key is a new intent. The retention is assumed longer than a
 * request can stay at the provider: a closed attempt's request does not act
 * after its job is purged.) */
inline CHECK_P5_PURGE(j) {
#ifdef CHK_P5
	gn = 0;
	for (gk : 1 .. NA) {
		if
		:: ajob[gk] == j && OPEN(gk) -> gn++
		:: else
		fi
	}
	P5_key_free_safe = (gn == 0);
	assert(P5_key_free_safe);
	gk = 0; gn = 0
#else
	skip
#endif
}

/* P6 when a write presenting claim token `tok` on attempt a is accepted. */
inline CHECK_P6(a, tok) {
#if defined(CHK_P6) && defined(LEASES)
	if
	:: tok != 0 ->
		P6_claim_holds = !(alease[a] && aclaim[a] != tok);
		assert(P6_claim_holds)
	:: else
	fi
#else
	skip
#endif
}

/* ------------------------------------------------------------------------
 * The store. Each operation below is the body of ONE atomic step: callers
 * run it inside a d_step, together with the caller's purely local
 * bookkeeping just before and after it (which no other actor can see, so
 * merging it into the step changes nothing but the size of the search).
 * ------------------------------------------------------------------------ */

/* Store.CreateJob: pgCreateJob (INSERT ... ON CONFLICT (owner, idempotency_key)
 * DO NOTHING, else the row that holds the key) / sqliteCreateJob. */
inline NEWJOB(got) {
	njobs++; got = njobs;
	jstate[got] = pending; jver[got] = 1; holder = got
}
inline CreateJob(got, created) {
	created = 0;
	if
	:: holder != 0 -> got = holder
	:: else ->
		if
		:: njobs < NJ -> NEWJOB(got); created = 1
		:: else -> got = 0              /* model bound: no job slot left */
		fi
	fi;
	if
	:: created -> printf("MSC: Submit -> CreateJob creates job %d\n", got)
	:: else
	fi;
	CHECK_STORE()
}

/* Store.ReplaceJob: pgReplaceJob (UPDATE jobs SET idempotency_key = RetiredKey(..)
 * WHERE id = $old AND owner/key match AND state IN (failed, cancelled)
 * AND NOT EXISTS (an attempt starting, running or unknown: the blocker)
 * AND NOT EXISTS (an attempt cancelled with reason ReasonDropped...),
 * then INSERT the new job, in one statement) / sqliteRetireKey and
 * sqliteCreateJob in one immediate transaction / memstore under its lock.
 * The two NOT EXISTS are the guard of commit 8424a84; BROKEN_REUSE_GUARD
 * drops them, as the code was before it. When nothing is retired it is
 * CreateJob: the job holding the key is returned unchanged (Submit reports
 * the blocking attempt as ErrAttemptInFlight; no difference to the state). */
inline REUSE_GUARD_OK(old) {
	gm = 0;
#ifndef BROKEN_REUSE_GUARD
	for (gk : 1 .. NA) {
		if
		:: ajob[gk] == old && (OPEN(gk) || adrop[gk]) -> gm++
		:: else
		fi
	}
#endif
	gk = 0
}
inline ReplaceJob(old, got, created) {
	created = 0;
	REUSE_GUARD_OK(old);
	if
	:: holder == old && (jstate[old] == failed || jstate[old] == cancelled) && gm == 0 && njobs < NJ ->
		CHECK_P5_REUSE(old);
		NEWJOB(got); created = 1;           /* the old job now holds a retired key */
		printf("MSC: Submit -> ReplaceJob retires job %d's key: new job %d\n", old, got)
	:: else ->
		if
		:: holder == old && gm != 0 -> printf("MSC: Submit -> ReplaceJob refused: job %d may still act\n", old)
		:: else
		fi;
		CreateJob(got, created)
	fi;
	gm = 0;
	CHECK_STORE()
}

/* Store.CloseJob: pgCloseJob (UPDATE jobs SET state = $to, version = version+1
 * WHERE id = $1 AND state IN (pending, running) AND (NOT $fail OR NOT EXISTS
 * (an attempt starting, running or unknown))). CancelJob is allowed with
 * attempts open; FailJob is not. */
inline CloseJob(j, to, r) {
	if
	:: jstate[j] == 0 || jstate[j] == purged -> r = e_notfound
	:: JTERM(j) -> r = e_closed
	:: else ->
		gn = 0;
		if
		:: to == failed ->
			for (gk : 1 .. NA) {
				if
				:: ajob[gk] == j && OPEN(gk) -> gn++
				:: else
				fi
			}
		:: else
		fi;
		if
		:: gn > 0 -> r = e_inflight
		:: else -> jstate[j] = to; jver[j]++; r = ok
		fi
	fi;
	if
	:: (r == ok || r == e_inflight) && to == cancelled -> printf("MSC: CancelJob(job %d) -> %e\n", j, r)
	:: (r == ok || r == e_inflight) && to == failed -> printf("MSC: FailJob(job %d) -> %e\n", j, r)
	:: else
	fi;
	gk = 0; gn = 0;
	CHECK_STORE()
}

/* Store.CreateAttempt: pgCreateAttempt (UPDATE jobs SET state = 'running',
 * attempt_count = attempt_count+1 WHERE state IN (pending, running) AND NOT
 * EXISTS (an attempt starting or unknown, or running unless $hedge); INSERT
 * the attempt, starting, base_version = the job's version). */
inline CreateAttempt(j, p, hedge, a, r) {
	a = 0;
	if
	:: jstate[j] == 0 || jstate[j] == purged -> r = e_notfound
	:: JTERM(j) -> r = e_closed
	:: else ->
		gn = 0; gm = 0;
		for (gk : 1 .. NA) {
			if
			:: ajob[gk] == j && astate[gk] == starting -> gn++
#ifndef BROKEN_INDOUBT
			:: ajob[gk] == j && astate[gk] == unknown -> gn++
#endif
			:: ajob[gk] == j && astate[gk] == running -> gm++
			:: else
			fi
		}
		if
		:: gn > 0 || (!hedge && gm > 0) -> r = e_inflight
		:: else ->
			if
			:: natt < NA && jn[j] < MAXPERJOB ->
				natt++; a = natt;
				astate[a] = starting; ajob[a] = j; abase[a] = jver[j]; aprov[a] = p;
				jn[j]++; jstate[j] = running; r = ok
			:: else -> r = e_bound      /* model bound: no attempt slot left */
			fi
		fi
	fi;
	printf("MSC: W%d StartAttempt(job %d, provider %d, hedge %d) -> attempt %d %e\n", me, j, p, hedge, a, r);
	gk = 0; gn = 0; gm = 0;
	CHECK_STORE()
}

/* Store.UpdateAttempt: pgUpdateAttempt (UPDATE intentjobs_attempts SET state = $to
 * WHERE id = $1 AND state IN ($from..) AND ($token = '' OR claim_token = $token)),
 * the unique index intentjobs_attempts_one_in_doubt refusing a second attempt in
 * doubt. The from-sets are attemptSources (attempt.go). tok: a reconciler's
 * claim token; 0 for a runner's or an operator's write, which ignore claims. */
inline UpdateAttempt(a, to, tok, r) {
	if
	:: astate[a] == 0 || astate[a] == purged -> r = e_notfound
#if defined(LEASES) && !defined(BROKEN_CLAIM)
	:: tok != 0 && aclaim[a] != tok -> r = e_claimlost
#endif
	:: else ->
		if
		:: (to == running && astate[a] == starting) ||
		   (to == unknown && (astate[a] == starting || astate[a] == running)) ||
		   ((to == failed || to == cancelled) && OPEN(a)) ->
			gn = 0;
			if
			:: to == unknown ->
				for (gk : 1 .. NA) {
					if
					:: gk != a && ajob[gk] == ajob[a] && INDOUBT(gk) -> gn++
					:: else
					fi
				}
			:: else
			fi;
			if
			:: gn > 0 -> r = e_inflight
			:: else -> CHECK_P6(a, tok); astate[a] = to; r = ok;
				if
				:: ATERM(a) -> RELEASE(a)
				:: else
				fi
			fi
		:: else -> r = e_transition
		fi
	fi;
	printf("MSC: UpdateAttempt(attempt %d -> %e, claim %d) -> %e\n", a, to, tok, r);
	gk = 0; gn = 0;
	CHECK_STORE()
}

/* Manager.MarkRunning: starting -> running; an unknown attempt stays unknown
 * and only learns its reference (no change here). r: the state after. */
inline MarkRunning(a, r) {
	if
	:: astate[a] == starting -> astate[a] = running
	:: else
	fi;
	r = astate[a];
	printf("MSC: MarkRunning(attempt %d) -> %e\n", a, r);
	CHECK_STORE()
}

/* Store.CompleteAttempt: the compare-and-swap of cas.go (pgCompleteJob and
 * pgCompleteFate sent together, or pgCompleteAttempt; sqliteCompleteJob in
 * one immediate transaction):
 *   UPDATE jobs SET state='succeeded', completed_by=$a, version=version+1
 *    WHERE id=$job AND version=$base AND completed_by IS NULL AND state='running'
 *      AND the attempt is open AND ($token = '' OR claim_token = $token)
 * then the attempt's fate: succeeded; else lost (another attempt won); else
 * cancelled (the job was closed). A loser's result is stored nowhere. */
#ifdef BROKEN_CAS
#define CAS_GUARD(a, j) (true)
#else
#define CAS_GUARD(a, j) (jstate[j] == running && jver[j] == abase[a] && jcb[j] == 0)
#endif
inline CompleteAttempt(a, tok, r) {
	if
	:: astate[a] == 0 || astate[a] == purged -> r = e_notfound
#if defined(LEASES) && !defined(BROKEN_CLAIM)
	:: tok != 0 && aclaim[a] != tok -> r = e_claimlost
#endif
	:: !OPEN(a) -> r = e_transition
	:: else ->
		CHECK_P6(a, tok);
		gi = ajob[a];
		if
		:: CAS_GUARD(a, gi) ->
			jstate[gi] = succeeded; jcb[gi] = a; jver[gi]++; astate[a] = succeeded; r = ok
		:: else ->
			adrop[a] = 1;                   /* the result was delivered and dropped */
			if
			:: jcb[gi] != 0 -> astate[a] = lost; r = e_lostrace
			:: else -> astate[a] = cancelled; r = e_closed
			fi
		fi;
		RELEASE(a);
		gi = 0
	fi;
	printf("MSC: Complete(attempt %d, claim %d) -> %e\n", a, tok, r);
	CHECK_STORE()
}

/* Store.ClaimAttempt: pgClaimAttempt (UPDATE intentjobs_attempts SET claim_token,
 * claimed_until WHERE id AND state = as listed AND (claimed_until IS NULL OR
 * claimed_until <= now)); StaleAttempts' listing is taken in the same step. */
inline ClaimAttempt(a, me, r) {
#ifdef LEASES
	if
	:: OPEN(a) && !alease[a] -> aclaim[a] = me; alease[a] = 1; r = ok
	:: else -> r = e_claimed
	fi;
#else
	r = ok;     /* one reconciler: its claim always holds (a crashed one's lease runs out) */
#endif
	printf("MSC: R%d ClaimAttempt(attempt %d) -> %e\n", me, a, r)
}

/* Store.RenewClaim: pgRenewClaim (UPDATE intentjobs_attempts SET claimed_until WHERE
 * id = $1 AND claim_token = $2): the reconciler's postpone. */
inline RenewClaim(a, me, r) {
#ifdef LEASES
	if
#ifndef BROKEN_CLAIM
	:: aclaim[a] == me && OPEN(a) -> alease[a] = 1; r = ok
#else
	:: OPEN(a) -> alease[a] = 1; r = ok
#endif
	:: else -> r = e_claimlost
	fi;
#else
	r = ok;
#endif
	printf("MSC: R%d RenewClaim(attempt %d) -> %e\n", me, a, r)
}

/* Store.PurgeJobs: pgPurge / sqlitePurgeable (a terminal job closed before the
 * cutoff, and NOT EXISTS (an attempt starting, running or unknown); its
 * attempts deleted with it; its key, live or retired, freed). The retention
 * clock is abstract: any terminal job may be past the cutoff. */
inline PurgeJob(j, r) {
	gn = 0;
#ifndef BROKEN_PURGE
	for (gk : 1 .. NA) {
		if
		:: ajob[gk] == j && OPEN(gk) -> gn++
		:: else
		fi
	}
#endif
	if
	:: JTERM(j) && gn == 0 ->
		CHECK_P5_PURGE(j);
		for (gk : 1 .. NA) {
			if
			:: ajob[gk] == j ->
				if
				:: !OPEN(gk) -> forgot[gk] = 1       /* retention ended the intent (P1) */
				:: else                              /* (BROKEN_PURGE only) it may still act */
				fi;
				astate[gk] = purged; alease[gk] = 0; aclaim[gk] = 0
			:: else
			fi
		}
		jstate[j] = purged;
		if
		:: holder == j -> holder = 0
		:: else
		fi;
		r = ok
	:: else -> r = e_notfound
	fi;
	if
	:: r == ok -> printf("MSC: Purge removes job %d\n", j)
	:: else
	fi;
	gk = 0; gn = 0;
	CHECK_STORE()
}

/* ------------------------------------------------------------------------
 * The provider.
 * ------------------------------------------------------------------------ */

/* Provider.Call puts the request on the wire (Runner.launch's goroutine). */
inline Send(a) {
	CHECK_P1_SEND(a);
	sent[a] = 1;
	printf("MSC: W%d sends attempt %d's request to provider %d\n", me, a, aprov[a])
}

/* Provider.Lookup (by reference, or by the attempt's key): truthful. A request
 * that has not acted is pending, unless the provider fences its key at that
 * moment: it answers not_found and refuses a late request with that key
 * ("OutcomeNotFound only when the provider will never act on that request",
 * provider.go). One atomic step at the provider. */
inline LOOKUP(a, ev) {
	if
	:: prov[a] == acted -> ev = o_done
	:: prov[a] == refused -> ev = o_failed
	:: prov[a] == fenced -> ev = o_notfound
	:: prov[a] == 0 -> ev = o_pending
	:: prov[a] == 0 -> prov[a] = fenced; ev = o_notfound
	fi;
	printf("MSC: Lookup(attempt %d) -> %e\n", a, ev)
}

/* The environment: the provider acts on a request that is out, at most once,
 * at any later time (acts, e.g. charges; or refuses definitively); the clock
 * ends a claim's lease at any time (a paused reconciler may overrun it). */
#if defined(LEASES) && defined(LIVE)
/* For liveness, a lease ends before its holder has written at most MAXEARLY
 * times in all: the lease is long enough for a live reconciler's lookup and
 * write (Reconciler.lease), and only a paused one overruns it. A lease whose
 * holder is done with it (postponed, or the holder crashed) ends freely. */
#ifndef MAXEARLY
#define MAXEARLY 1
#endif
#ifdef LEASE_OVERRUN
#define EARLY_OK true          /* sanity check: every lease may be overrun, forever */
#else
#define EARLY_OK (early < MAXEARLY)
#endif
#define LEASE_ENDS(b) :: d_step { alease[b] && (!busy[b] || EARLY_OK) -> \
	if :: busy[b] -> early++ :: else fi; alease[b] = 0; printf("MSC: the lease on attempt %d runs out\n", b) }
#define BUSY(a, v) if :: aclaim[a] == me -> busy[a] = v :: else fi
#elif defined(LEASES)
#define LEASE_ENDS(b) :: d_step { alease[b] -> alease[b] = 0; printf("MSC: the lease on attempt %d runs out\n", b) }
#define BUSY(a, v) skip
#else
#define BUSY(a, v) skip
#define LEASE_ENDS(b)
#endif
#define PROVIDER_AND_CLOCK(b) \
	:: d_step { sent[b] && prov[b] == 0 -> prov[b] = acted; CHECK_P1_ACT(b); printf("MSC: provider ACTS on attempt %d's request\n", b) } \
	:: d_step { sent[b] && prov[b] == 0 -> prov[b] = refused; printf("MSC: provider refuses attempt %d's request\n", b) } \
	LEASE_ENDS(b)

active proctype Env() {
end_env:
	do
	PROVIDER_AND_CLOCK(1)
#if NA >= 2
	PROVIDER_AND_CLOCK(2)
#endif
#if NA >= 3
	PROVIDER_AND_CLOCK(3)
#endif
#if NA >= 4
	PROVIDER_AND_CLOCK(4)
#endif
	od
}

/* ------------------------------------------------------------------------
 * Client: Manager.Submit(req{Reuse: KeyReuseAfterFailureOrCancel}) (job.go
 * submit), any number of times (a retry, a double click, a redelivery):
 * CreateJob; if the key's job is failed or cancelled (Reuse.Frees),
 * ReplaceJob. These are two store calls; they are one step here because
 * nothing another actor can do between them changes their outcome: the
 * state ReplaceJob rechecks is terminal (it never changes), and the key
 * changes hands only by this client's own Submit or by a purge, after
 * which ReplaceJob is CreateJob. A lost response changes nothing durable.
 * ------------------------------------------------------------------------ */
active proctype Client() {
	byte got, old; bit created;
end_client:
	do
	:: d_step {
		CreateJob(got, created);
		if
		:: !created && got != 0 && (jstate[got] == failed || jstate[got] == cancelled) ->
			old = got; got = 0;
			ReplaceJob(old, got, created)
		:: else
		fi;
		got = 0; old = 0; created = 0
	   }
	od
}

/* ------------------------------------------------------------------------
 * Worker: Runner.Run(jobID) (runner.go), with a target and one verified
 * fallback (Runner.Fallbacks, CheckFailover passing); HedgeAfter with
 * -DHEDGE, AbandonLosers with -DABANDON_LOSERS (both off by default, as in
 * the Runner). With one worker (PRECHECK false) it also stands for any
 * caller of StartAttempt, and for several Runs whose read of the attempts
 * is stale.
 * ------------------------------------------------------------------------ */

/* A crash point. For safety any number of crashes (a crash only loses local
 * state, so unbounded crashes add no states); for the liveness check (LIVE)
 * at most MAXCRASH in all, since an actor that crashes forever never helps. */
#ifdef LIVE
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
byte crashes;
#define CRASH d_step { crashes < MAXCRASH -> crashes++ }
#else
#define CRASH skip
#endif

#ifdef ABANDON_LOSERS
/* hasWinner (won: 1) or closedMeanwhile (closed: 2), after a store call's answer r */
#define WON_OR_CLOSED(r) \
	if \
	:: r == ok || r == e_lostrace || (r == e_transition && jstate[j] == succeeded) -> wc = 1 \
	:: r == e_closed -> wc = 2 \
	:: else \
	fi
#else
#define WON_OR_CLOSED(r) skip
#endif

/* Runner.tryStart: the next candidate (the target, then the verified
 * fallback, each once per Run; a provider with a failed attempt is skipped)
 * and StartAttempt. r == ok: a is to be launched. h: a hedge. */
inline START(h) {
	if
	:: !(tried & 1) -> p = 0
#ifndef NO_FAILOVER
	:: (tried & 1) && !(tried & 2) -> p = 1
#endif
	:: else -> p = 2                     /* none left: ErrNoProviderLeft */
	fi;
	if
	:: p < 2 ->
		tried = tried | (1 << p);
		CreateAttempt(j, p, h, a, r);
		if
		:: r != ok -> stop = 1; a = 0;    /* in flight elsewhere, closed, ...: start nothing more */
			WON_OR_CLOSED(r)
		:: else
		fi
	:: else -> skip
	fi;
	p = 0
}

/* Runner.launch: the request goes out, the flight is registered. */
inline LAUNCH(h) {
	Send(a);
	if
	:: f0 == 0 -> f0 = a
	:: else -> f1 = a
	fi;
	if
	:: !h -> fired = 0                   /* the hedge timer restarts with a non-hedge attempt */
	:: else
	fi;
	a = 0; r = 0
}

/* What a flight (an attempt whose request is out: fa; ack: acknowledged,
 * running; tout: its deadline passed) reports next (Runner.handle, finish,
 * offer, fail, inDoubt). Each is one store call with the runner's
 * bookkeeping. */
#ifdef HEDGE
#define ACK(fa, ack, tout) \
	:: d_step { fa != 0 && !ack && !tout && prov[fa] != fenced -> \
		MarkRunning(fa, r); ack = (r == running); r = 0 }
#else
#define ACK(fa, ack, tout)  /* without hedging, running and starting behave alike: see README */
#endif
#define FLIGHT(fa, ack, tout) \
	/* ack(ref): the provider took the request; MarkRunning */ \
	ACK(fa, ack, tout) \
	/* the call returns a result, even after its deadline: Complete (offer) */ \
	:: d_step { fa != 0 && prov[fa] == acted -> \
		CompleteAttempt(fa, 0, r); \
		stop = 1; WON_OR_CLOSED(r); \
		fa = 0; ack = 0; tout = 0; r = 0 } \
	/* a definitive error (refused; a fenced key is refused): Fail, then the next provider */ \
	:: d_step { fa != 0 && !tout && (prov[fa] == refused || prov[fa] == fenced) -> \
		UpdateAttempt(fa, failed, 0, r); \
		if :: r != ok -> stop = 1 :: else fi; \
		fa = 0; ack = 0; tout = 0; r = 0 } \
	/* the deadline passes (or the call fails without a definitive answer): MarkUnknown */ \
	:: d_step { fa != 0 && !tout -> \
		tout = 1; stop = 1; \
		UpdateAttempt(fa, unknown, 0, r); \
		if :: r == e_inflight -> RETRY_LATER(fa) :: else fi; r = 0 } \
	/* the cancelled call returns with the context's error: nothing to record */ \
	:: d_step { fa != 0 && tout -> fa = 0; ack = 0; tout = 0 }

#ifdef ABANDON_LOSERS
/* Runner.AbandonLosers (runner.go abandonLosers, cancelAttempt): once the
 * job is won (wc == 1) or closed without a winner (wc == 2), the run stops
 * waiting for the calls still in flight, one store call each: their
 * attempts are recorded cancelled ("abandoned: attempt X completed the job")
 * when the job was won, and unknown when it was closed, since the provider
 * may still act (MarkUnknown refused while another attempt is in doubt
 * leaves it as it is). A result that comes all the same is offered to
 * Complete (Runner.finish): the flight stays, as after its deadline.
 * BROKEN_ABANDON is the code before commit 8424a84: cancelled in both cases,
 * and a late result only logged. */
#ifdef BROKEN_ABANDON
#define ABANDONED(f, k, t) UpdateAttempt(f, cancelled, 0, r); f = 0; k = 0; t = 0
#else
#define ABANDONED(f, k, t) \
	if \
	:: wc == 1 -> UpdateAttempt(f, cancelled, 0, r) \
	:: else -> UpdateAttempt(f, unknown, 0, r) \
	fi; \
	t = 1
#endif
inline ABANDON() {
	if
	:: wc != 0 && f0 != 0 && !t0 -> d_step { ABANDONED(f0, k0, t0); r = 0 }
	:: else
	fi;
	if
	:: wc != 0 && f1 != 0 && !t1 -> d_step { ABANDONED(f1, k1, t1); r = 0 }
	:: else
	fi
}
#endif

#ifdef HEDGE
/* Runner.inDoubt / retryUnknown: MarkUnknown refused while a hedge is
 * starting is retried after each message, and given up (the attempt left
 * running, for a reconciler) once nothing is in flight. */
#define RETRY_LATER(x) if :: u0 == 0 -> u0 = x :: else -> u1 = x fi
inline RETRY_UNKNOWN() {
	if
	:: u0 != 0 || u1 != 0 ->
		d_step {
			if
			:: u0 != 0 ->
				UpdateAttempt(u0, unknown, 0, r);
				if :: r != e_inflight -> u0 = 0 :: else fi
			:: else
			fi;
			r = 0
		};
		d_step {
			if
			:: u1 != 0 ->
				UpdateAttempt(u1, unknown, 0, r);
				if :: r != e_inflight -> u1 = 0 :: else fi
			:: else
			fi;
			if
			:: f0 == 0 && f1 == 0 -> u0 = 0; u1 = 0
			:: else
			fi;
			r = 0
		}
	:: else
	fi
}
#else
#define RETRY_LATER(x) assert(false)        /* one attempt at a time: never refused */
#endif

proctype Worker(byte me) {
	byte j;                 /* the job this Run executes */
	byte f0, f1;            /* attempts in flight (run.inflight); f1 only with hedging */
	bit  k0, k1;            /* acknowledged: running (flight.acked) */
	bit  t0, t1;            /* deadline passed (flight.timedOut) */
	byte u0, u1;            /* MarkUnknown to retry (run.stillUnknown) */
	byte tried;             /* candidates used or excluded: bit 0 the target, bit 1 the fallback */
	bit  stop;              /* won, closed, resolved meanwhile, in doubt, refused: start nothing more */
	bit  fired;             /* the hedge timer fired (run.hedgeFired) */
	byte wc;                /* ABANDON_LOSERS: the job was won (1) or closed without a winner (2) */
	byte a, p; mtype r;

crash:
	/* a crash loses the Run's state; its attempts stay as stored */
	skip;
	d_step {
		j = 0; f0 = 0; f1 = 0; k0 = 0; k1 = 0; t0 = 0; t1 = 0; u0 = 0; u1 = 0;
		tried = 0; stop = 0; fired = 0; wc = 0; a = 0; p = 0; r = 0
	};
end_worker:
	/* A job ID is delivered (workers receive job IDs), and Runner.Run reads
	 * the job and its attempts: a terminal job, or an attempt still open
	 * (another worker's, or one in doubt), and it returns at once. */
	if
#define DELIVER(x) \
	:: d_step { JLIVE(x) -> \
		j = x; \
		for (gk : 1 .. NA) { \
			if \
			:: PRECHECK && ajob[gk] == j && OPEN(gk) -> stop = 1 \
			:: ajob[gk] == j && astate[gk] == failed -> tried = tried | (1 << aprov[gk]) \
			:: else \
			fi \
		} \
		gk = 0; \
		if \
		:: stop -> printf("MSC: W%d Run(job %d): an attempt is open, returns\n", me, j) \
		:: else -> printf("MSC: W%d Run(job %d) reads the job and its attempts\n", me, j) \
		fi; \
		if :: stop -> j = 0; stop = 0; tried = 0 :: else fi }
	DELIVER(1)
#if NJ >= 2
	DELIVER(2)
#endif
	fi;
	if
	:: j == 0 -> goto end_worker
	:: else
	fi;
loop:
#ifdef ABANDON_LOSERS
	ABANDON();
#endif
	/* run.loop: tryStart; Run returns when nothing is in flight */
	if
	:: !stop && f0 == 0 && f1 == 0 ->
		d_step { START(0) };
		if
		:: a != 0 ->
			if
			:: CRASH -> goto crash       /* crash before the request goes out */
			:: d_step { LAUNCH(0) }
			fi
		:: else
		fi
#ifdef HEDGE
	:: !stop && fired && ((f0 != 0 && f1 == 0 && k0 && !t0) || (f1 != 0 && f0 == 0 && k1 && !t1)) ->
		d_step { START(1) };
		if
		:: a != 0 ->
			if
			:: CRASH -> goto crash
			:: d_step { LAUNCH(1) }
			fi
		:: else
		fi
#endif
	:: else
	fi;
#ifdef ABANDON_LOSERS
	ABANDON();
#endif
	if
	:: f0 == 0 && f1 == 0 -> goto crash  /* Run returns; the worker waits for the next job ID */
	:: else
	fi;
	/* wait for the next message */
	if
	FLIGHT(f0, k0, t0)
#ifdef HEDGE
	FLIGHT(f1, k1, t1)
	:: d_step { !fired -> fired = 1 }    /* HedgeAfter of silence */
#endif
	:: CRASH -> goto crash               /* the worker crashes */
	fi;
#ifdef HEDGE
	RETRY_UNKNOWN();
#endif
	goto loop
}

/* ------------------------------------------------------------------------
 * Reconciler (reconciler.go ReconcileOnce, claim, resolve): claim a stale
 * attempt with a lease, ask its provider, record the answer presenting the
 * claim's token; or crash at any point, the lease running on.
 * ------------------------------------------------------------------------ */
#define CLAIM(x) \
	:: atomic { OPEN(x) && NOT_LEASED(x) -> a = x; ClaimAttempt(a, me, r); BUSY(a, 1); r = 0; LOOKUP(a, ev) }

proctype Reconciler(byte me) {
	byte a; mtype ev, r;
crash:
	skip;
	d_step { a = 0; ev = 0; r = 0 };
end_recon:
	/* StaleAttempts and ClaimAttempt (any open attempt may be stale: its
	 * worker paused or crashed; timing is abstract), then Provider.Lookup in
	 * the same step. Only other reconcilers read a claim, and the interval
	 * that matters to them, between the lookup and the write (the lease
	 * may run out and another reconciler take the attempt over), is kept. */
	if
	CLAIM(1)
#if NA >= 2
	CLAIM(2)
#endif
#if NA >= 3
	CLAIM(3)
#endif
#if NA >= 4
	CLAIM(4)
#endif
	fi;
	/* record the answer with the claim's token; or crash first, the lease
	 * running on until the clock ends it */
	if
	:: CRASH -> BUSY(a, 0); goto crash
	:: d_step {
		BUSY(a, 0);
		if
		:: ev == o_pending -> RenewClaim(a, me, r)                /* postpone */
		:: ev == o_done -> CompleteAttempt(a, me, r)              /* complete */
		:: ev == o_failed -> UpdateAttempt(a, failed, me, r)      /* settle(AttemptFailed) */
		:: ev == o_notfound -> UpdateAttempt(a, cancelled, me, r) /* settle(AttemptCancelled) */
		fi;
#ifdef CHK_P4
		/* P4, bounded: the provider's final answer, written under a claim
		 * that was not taken over, leaves the attempt out of doubt. */
		P4_evidence_resolves = !(ev != o_pending && r != e_claimlost && OPEN(a));
		assert(P4_evidence_resolves);
#endif
		a = 0; ev = 0; r = 0
	   }
	fi;
	goto crash
}

/* ------------------------------------------------------------------------
 * Operator: CancelJob or FailJob at any time, Purge (retention), and
 * resolving an attempt in doubt with evidence from the provider
 * (Manager.Complete / Fail / Cancel, without a claim).
 * ------------------------------------------------------------------------ */
#define OPICK(x) :: OPEN(x) -> a = x
#ifndef NO_FAILJOB
#define OP_FAILJOB(x) :: d_step { CloseJob(x, failed, r); r = 0 }
#else
#define OP_FAILJOB(x)
#endif
#ifndef NO_PURGE
#define OP_PURGE(x) :: d_step { PurgeJob(x, r); r = 0 }
#else
#define OP_PURGE(x)
#endif
#define OPJOB(x) \
	:: d_step { CloseJob(x, cancelled, r); r = 0 } \
	OP_FAILJOB(x) \
	OP_PURGE(x)

#ifndef NO_OPERATOR
active proctype Operator() {
	byte a; mtype ev, r;
end_op:
	do
	/* CancelJob, FailJob (Manager.closeJob -> Store.CloseJob) or a purge
	 * pass (Store.PurgeJobs) on either job: one store call each */
	OPJOB(1)
#if NJ >= 2
	OPJOB(2)
#endif
#ifndef NO_OPERATOR_RESOLVE
	/* resolve an attempt with evidence: look at the provider and record what
	 * it says, without a claim (Manager.Complete, Fail, Cancel). One step:
	 * the provider's final answers never change, so what others do between
	 * the look and the write changes nothing but which write comes first. */
	:: atomic {
		if
		OPICK(1)
#if NA >= 2
		OPICK(2)
#endif
#if NA >= 3
		OPICK(3)
#endif
#if NA >= 4
		OPICK(4)
#endif
		fi;
		LOOKUP(a, ev);
		if
		:: ev == o_done -> CompleteAttempt(a, 0, r)
		:: ev == o_failed -> UpdateAttempt(a, failed, 0, r)
		:: ev == o_notfound -> UpdateAttempt(a, cancelled, 0, r)
		:: else                          /* pending: no evidence, nothing to do */
		fi;
#ifdef CHK_P4
		P4_evidence_resolves = !(ev != o_pending && OPEN(a));
		assert(P4_evidence_resolves);
#endif
		a = 0; ev = 0; r = 0
	   }
#endif
	od
}

#endif

#ifdef LIVE
/* P4 (liveness): once the provider has settled an open attempt's request
 * (acted, refused, or fenced), the attempt eventually leaves doubt; under
 * weak fairness (pan -a -f), with finitely many crashes. */
#define SETTLED_OPEN(x) (OPEN(x) && prov[x] != 0)
ltl p4 {
	[] (SETTLED_OPEN(1) -> <> !OPEN(1))
#if NA >= 2
	&& [] (SETTLED_OPEN(2) -> <> !OPEN(2))
#endif
#if NA >= 3
	&& [] (SETTLED_OPEN(3) -> <> !OPEN(3))
#endif
}
#endif

init {
	atomic {
		run Worker(1);
#if NWORKERS >= 2
		run Worker(2);
#endif
#if NRECON >= 1
		run Reconciler(1);
#endif
#if NRECON >= 2
		run Reconciler(2);
#endif
	}
}
