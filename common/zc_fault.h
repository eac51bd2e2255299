/*
 * common: the fault-point registry, in test builds only (meson -Dtest_faults=true defines
 * ZC_FAULTS for every module; the Makefile's build and build-asan turn it on, a plain
 * `meson setup` or a release build leaves it off).
 *
 * A fault point is a named place in the code (the table below), evaluated with ZC_FAULT()
 * and optionally scoped by an instance: a drive index, a peer's target. A test arms a rule
 * on a point, in process with zc_fault_arm(), in a daemon with one environment variable
 * read once at start (zc_fault_env):
 *
 *   ZEST_FAULTS="RULE[,RULE...]"   RULE = POINT[/INSTANCE][@FROM][*COUNT]=ACTION
 *   ACTION = delay:DURATION | drop | reset | eio | err:ERRNO | pause:PATH
 *
 * e.g. ZEST_FAULTS="drive.write/0=delay:50ms,drive.write/2*3=eio,peer.send@2=reset".
 * Hits are numbered from 1 per rule (or by the caller: a stream's message number). A rule
 * fires on hits FROM (default 1) to FROM+COUNT-1; no COUNT: on every hit from FROM, except
 * that @FROM alone fires once. A rule whose count is spent disarms itself.
 *  delay  the point sleeps DURATION (or, for a level such as admission.latency, reports it)
 *  drop   the caller loses the message; reset: the caller ends its call as a reset link
 *  eio / err:ERRNO   the caller fails the operation with -EIO / -ERRNO
 *  pause  creates PATH.reached, then waits while PATH exists (inotify, at most 120 s): a
 *         Python test holds a daemon's request at the point, deterministically
 *  call   (API only) fn(arg, hit) runs at the point, on the caller's thread
 *
 * Without the option, ZC_FAULT() is the constant 0 and no zc_fault symbol exists. With it,
 * a point no rule is armed on costs one relaxed atomic load.
 */
#ifndef ZEST_ZC_FAULT_H
#define ZEST_ZC_FAULT_H

#include <stdint.h>

/* The points. Keep zc_fault.c's names and docs/reliability.md in step. */
enum zc_fault_point {
	ZC_FP_DRIVE_WRITE,     /* "drive.write" /drive: a write SQE, on its ring thread: delay
	                        * before submission; eio/err: its completion reports that */
	ZC_FP_META_TXN,        /* "meta.txn" /replica: a metadata write transaction there: err */
	ZC_FP_ADM_LATENCY,     /* "admission.latency": delay: the least write latency admission
	                        * sees (a level, no sleep); wake waiters with a kick */
	ZC_FP_PEER_SEND,       /* "peer.send" /target: a WriteCell message on the rpc client
	                        * (hit = the stream's message number, the open's first): delay,
	                        * drop, reset */
	ZC_FP_DN_COMPOSE,      /* "dn.compose": dn_compose_if between its part reads and its
	                        * transaction (hit = the attempt): call, pause, delay */
	ZC_FP_DN_READ,         /* "dn.read" /extent: a read, its object looked up, before it
	                        * holds its extents; /cells: a piece's extent found, before
	                        * its cell files open: call, pause, delay */
	ZC_FP_MPU_LISTED,      /* "mpu.complete-listed": a Complete listed its parts */
	ZC_FP_MPU_MARKED,      /* "mpu.complete-marked": a Complete wrote its mark */
	ZC_FP_MPU_COMPOSED,    /* "mpu.after-compose": between a Complete's compose and its
	                        * part deletes */
	ZC_FP_MPU_ABORT,       /* "mpu.abort-marked": an Abort wrote its mark */
	ZC_FP_S3_COND_SEEN,    /* "s3.cond-seen": a write's If-None-Match: <etag> looked at the
	                        * key, before its commit */
	ZC_FP_COUNT
};

enum zc_fault_kind {
	ZC_FAULT_NONE,
	ZC_FAULT_DELAY,
	ZC_FAULT_DROP,
	ZC_FAULT_RESET,
	ZC_FAULT_ERR,
	ZC_FAULT_PAUSE,
	ZC_FAULT_CALL,
};

/* One rule's action and window. */
struct zc_fault {
	enum zc_fault_kind kind;
	uint64_t delay_ns;                   /* DELAY */
	int err;                             /* ERR: a -errno; 0: -EIO */
	const char *path;                    /* PAUSE (copied) */
	void (*fn)(void *arg, unsigned hit); /* CALL */
	void *arg;
	unsigned from;  /* the first hit that fires; 0: 1 */
	unsigned count; /* hits that fire; 0: every one from `from` */
};

#ifdef ZC_FAULTS
#include <stdatomic.h>

extern atomic_uint zc_fault_armed[ZC_FP_COUNT]; /* rules armed on each point */

/*
 * Evaluate point p for instance inst (NULL: none) at hit seq (0: the rule counts). Performs
 * delay, pause and call itself and returns 0; returns ZC_FAULT_DROP or ZC_FAULT_RESET for
 * the caller to act on, or a -errno to fail with. 0 when no rule fires.
 */
int zc_fault_hit(enum zc_fault_point p, const char *inst, unsigned seq);
/* zc_fault_hit with a numbered instance (a drive, a replica). */
int zc_fault_hit_idx(enum zc_fault_point p, unsigned idx, unsigned seq);
/* The DELAY of the rule armed on p (any instance), without sleeping or counting; 0: none. */
uint64_t zc_fault_level_ns(enum zc_fault_point p);

#define ZC_FAULT(p, inst, seq)                                                        \
	(atomic_load_explicit(&zc_fault_armed[(p)], memory_order_relaxed)             \
	         ? zc_fault_hit((p), (inst), (seq))                                     \
	         : 0)
#define ZC_FAULT_IDX(p, idx, seq)                                                     \
	(atomic_load_explicit(&zc_fault_armed[(p)], memory_order_relaxed)             \
	         ? zc_fault_hit_idx((p), (idx), (seq))                                  \
	         : 0)
#define ZC_FAULT_LEVEL_NS(p)                                                          \
	(atomic_load_explicit(&zc_fault_armed[(p)], memory_order_relaxed)             \
	         ? zc_fault_level_ns(p)                                                 \
	         : 0)

/* Arm f on point p for instance inst (NULL: every instance), replacing the rule there.
 * Returns 0, -EINVAL or -ENOMEM. Any thread. */
int zc_fault_arm(enum zc_fault_point p, const char *inst, const struct zc_fault *f);
/* Disarm p's rule for inst (NULL: every rule on p). */
void zc_fault_disarm(enum zc_fault_point p, const char *inst);
/* Disarm every rule. */
void zc_fault_clear(void);
/* Hits on which p's rule for inst fired so far (0: none, or no such rule). */
unsigned zc_fault_fired(enum zc_fault_point p, const char *inst);
/* Arm the rules of spec (the ZEST_FAULTS syntax). Returns the number armed or -EINVAL
 * (nothing armed; a message logged). */
int zc_fault_parse(const char *spec);
/* Read ZEST_FAULTS once, at a daemon's start: as zc_fault_parse; 0 when unset. */
int zc_fault_env(void);
/* The point named name, or -EINVAL. */
int zc_fault_point_of(const char *name);
#else
#define ZC_FAULT(p, inst, seq)    0
#define ZC_FAULT_IDX(p, idx, seq) 0
#define ZC_FAULT_LEVEL_NS(p)      ((uint64_t)0)
#endif

#endif
