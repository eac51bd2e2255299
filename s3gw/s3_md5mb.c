/*
 * s3_md5mb: one MD5 hashing service for all concurrent uploads (MinIO's md5-simd idea over
 * s3_md5x8's AVX2 lanes). MD5 is serial within a message, so one upload cannot hash faster
 * than one core's OpenSSL; eight uploads can share the vector unit, one per 32-bit lane.
 *
 * Threads:
 *  - the owner of a stream (the worker thread serving the request) calls update/final/abort.
 *    While its stream is the only one open, update() hashes the span itself, serially
 *    (OpenSSL's block function): there is no one to share the lanes with, and a handoff to
 *    another thread would only add its cost. Otherwise:
 *    update() takes its own reference on the span (zc_seg.ref, the connection's read buffer)
 *    and queues it by reference: no payload byte is copied, except the < 64 B head and tail
 *    of a span that do not fill a whole 64-byte MD5 block, which go to a per-stream carry
 *    block (counted in s3_md5mb_stats.carry_bytes, with the copy of a full carry block into
 *    the queue: under 192 B per span). update() waits only when the stream's
 *    queue is full (max_queued bytes or RING entries): bounded memory, backpressure on that
 *    one upload. final() waits until the stream's queue is hashed, then pads on the owner's
 *    thread.
 *  - one hasher thread ("s3-md5mb") runs everything else: it puts up to 8 streams with
 *    queued blocks in the 8 lanes and runs s3_md5x8_blocks over them; a lane that runs out
 *    takes the stream's next span or another waiting stream, and stays empty (hashing a
 *    zero buffer, result dropped) when there is none. When fewer than min_lanes streams have
 *    data, the oldest waits at most alone_us for company and is then hashed serially
 *    (OpenSSL's MD5 block function), so a lone upload never waits for others; a stream whose
 *    owner waits (final, or a full queue) is hashed at once. It drops the references of the
 *    spans it has hashed, in this file. min_lanes is 2 by default because on this CPU the
 *    eight lanes run at ~3.4 GiB/s together (~0.43 a lane) against ~0.71 for OpenSSL on one
 *    message (zest-bench sums): two busy lanes of eight already cost less than two serial
 *    passes, one does not.
 * Locking: one mutex for the service; the hashing itself runs unlocked (a stream's state and
 * its head entry belong to the hasher while the stream is busy, to the owner otherwise).
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* MD5_Update over raw state: the serial block path */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/md5.h>

#include "s3_internal.h"

#define RING           64  /* queued entries per stream (a span makes at most 2) */
#define MAX_RUN        256 /* blocks per kernel call: lanes are refilled in between */
#define DEF_MAX_QUEUED (1u << 20)
#define DEF_ALONE_US   50
#define DEF_MIN_LANES  2 /* x8 ~0.43 GiB/s a lane, serial ~0.71: 2 lanes pay */

static const uint8_t zero_run[MAX_RUN * 64]; /* what empty lanes hash */

struct ent {
	const uint8_t *p; /* p == blk for a carry block */
	size_t nblk;
	struct zc_ref *ref; /* NULL for a carry block */
	uint8_t blk[64];
};

struct s3_md5mb_stream {
	struct s3_md5mb *mb;
	uint32_t st[4];
	uint64_t len;      /* bytes submitted */
	uint8_t carry[64]; /* owner only: the bytes past the last whole block */
	unsigned ncarry;
	/* under mb->lock */
	struct ent ring[RING];
	unsigned head, tail; /* head: next to hash; tail: next free (mod RING, counted) */
	size_t queued;       /* bytes in the ring */
	bool listed, busy, aborting, waiting;
	uint64_t since_ns; /* when it was listed: how long it has waited for company */
	struct s3_md5mb_stream *next;
	pthread_cond_t cond; /* the owner waits for room or for the end */
};

struct s3_md5mb {
	struct s3_md5mb_opts o;
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_t thr;
	bool stop;
	struct s3_md5mb_stream *lhead, *ltail; /* streams with queued blocks, not busy */
	unsigned nlisted;
	unsigned nopen; /* streams open */
	struct s3_md5mb_stats stats;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The serial path: OpenSSL's block function over our raw state (num 0, whole blocks). */
static void
serial_blocks(uint32_t st[4], const uint8_t *p, size_t nblk)
{
	MD5_CTX c;

	memset(&c, 0, sizeof(c));
	c.A = st[0];
	c.B = st[1];
	c.C = st[2];
	c.D = st[3];
	MD5_Update(&c, p, nblk * 64);
	st[0] = c.A;
	st[1] = c.B;
	st[2] = c.C;
	st[3] = c.D;
}

static void
list_add(struct s3_md5mb *mb, struct s3_md5mb_stream *s, uint64_t since)
{
	s->listed = true;
	s->since_ns = since;
	s->next = NULL;
	if (mb->ltail)
		mb->ltail->next = s;
	else
		mb->lhead = s;
	mb->ltail = s;
	mb->nlisted++;
}

static void
list_del(struct s3_md5mb *mb, struct s3_md5mb_stream *s)
{
	struct s3_md5mb_stream **pp = &mb->lhead, *prev = NULL;

	while (*pp && *pp != s) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = s->next;
	if (mb->ltail == s)
		mb->ltail = prev;
	s->listed = false;
	s->next = NULL;
	mb->nlisted--;
}

static struct s3_md5mb_stream *
list_pop(struct s3_md5mb *mb)
{
	struct s3_md5mb_stream *s = mb->lhead;

	if (s)
		list_del(mb, s);
	return s;
}

/* Under the lock: the head entry is hashed; returns its reference for the caller to put
 * after unlocking, and wakes the owner. */
static struct zc_ref *
ent_done(struct s3_md5mb_stream *s)
{
	struct ent *e = &s->ring[s->head % RING];
	struct zc_ref *ref = e->ref;

	s->queued -= e->nblk * 64;
	s->head++;
	if (s->waiting)
		pthread_cond_signal(&s->cond);
	return ref;
}

/* A stream leaves the hasher (lane or serial run): back on the list if it has more. */
static void
stream_release(struct s3_md5mb *mb, struct s3_md5mb_stream *s, uint64_t since)
{
	s->busy = false;
	if (s->head != s->tail && !s->aborting)
		list_add(mb, s, since);
	else if (s->waiting)
		pthread_cond_signal(&s->cond);
}

static void
put_refs(struct zc_ref **refs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (refs[i])
			zc_ref_put(refs[i]);
}

/* Under the lock on entry and exit: hash the queued entries of one lone stream. */
static void
run_serial(struct s3_md5mb *mb, struct s3_md5mb_stream *s)
{
	unsigned head = s->head, tail = s->tail, n = 0;
	struct zc_ref *refs[RING];
	size_t blocks = 0;

	s->busy = true;
	pthread_mutex_unlock(&mb->lock);
	for (unsigned i = head; i != tail; i++) {
		struct ent *e = &s->ring[i % RING];

		serial_blocks(s->st, e->p, e->nblk);
		blocks += e->nblk;
	}
	pthread_mutex_lock(&mb->lock);
	while (s->head != tail)
		refs[n++] = ent_done(s);
	mb->stats.serial_blocks += blocks;
	stream_release(mb, s, 0); /* still alone: no new wait for company */
	pthread_mutex_unlock(&mb->lock);
	put_refs(refs, n);
	pthread_mutex_lock(&mb->lock);
}

struct lane {
	struct s3_md5mb_stream *s; /* NULL: empty */
	const uint8_t *p;
	size_t left; /* blocks of the head entry not yet hashed */
};

/* Under the lock: fill empty lanes from the list; returns how many lanes have data. */
static unsigned
lanes_fill(struct s3_md5mb *mb, struct lane ln[8], uint32_t st[4][8])
{
	unsigned active = 0;

	for (int l = 0; l < 8; l++) {
		if (!ln[l].s) {
			struct s3_md5mb_stream *s = list_pop(mb);

			if (!s)
				continue;
			s->busy = true;
			ln[l].s = s;
			for (int w = 0; w < 4; w++)
				st[w][l] = s->st[w];
			ln[l].p = s->ring[s->head % RING].p;
			ln[l].left = s->ring[s->head % RING].nblk;
		}
		active++;
	}
	return active;
}

/* Under the lock on entry and exit: run the 8 lanes until fewer than min_lanes have data. */
static void
run_x8(struct s3_md5mb *mb)
{
	struct lane ln[8] = { { 0 } };
	uint32_t st[4][8] = { { 0 } };
	unsigned active = lanes_fill(mb, ln, st);

	while (active >= mb->o.min_lanes) {
		const uint8_t *p[8];
		size_t n = MAX_RUN;
		struct zc_ref *refs[8];
		unsigned nref = 0;

		for (int l = 0; l < 8; l++)
			if (ln[l].s && ln[l].left < n)
				n = ln[l].left;
		for (int l = 0; l < 8; l++)
			p[l] = ln[l].s ? ln[l].p : zero_run;
		pthread_mutex_unlock(&mb->lock);
		s3_md5x8_blocks(st, p, n);
		pthread_mutex_lock(&mb->lock);
		mb->stats.x8_runs++;
		mb->stats.x8_blocks += n * active;
		mb->stats.x8_idle_blocks += n * (8 - active);
		for (int l = 0; l < 8; l++) {
			struct s3_md5mb_stream *s = ln[l].s;

			if (!s)
				continue;
			ln[l].p += n * 64;
			ln[l].left -= n;
			if (ln[l].left)
				continue;
			refs[nref++] = ent_done(s);
			if (s->head != s->tail && !s->aborting) {
				ln[l].p = s->ring[s->head % RING].p;
				ln[l].left = s->ring[s->head % RING].nblk;
				continue;
			}
			for (int w = 0; w < 4; w++)
				s->st[w] = st[w][l];
			ln[l].s = NULL;
			stream_release(mb, s, now_ns());
		}
		if (nref) {
			pthread_mutex_unlock(&mb->lock);
			put_refs(refs, nref);
			pthread_mutex_lock(&mb->lock);
		}
		active = lanes_fill(mb, ln, st);
	}
	/* too few left for the vector unit: they go back to the list, to wait for company
	 * or go serial; the entry under way restarts where the lane stopped */
	for (int l = 0; l < 8; l++) {
		struct s3_md5mb_stream *s = ln[l].s;
		struct ent *e;

		if (!s)
			continue;
		e = &s->ring[s->head % RING];
		s->queued -= (e->nblk - ln[l].left) * 64;
		e->p = ln[l].p;
		e->nblk = ln[l].left;
		for (int w = 0; w < 4; w++)
			s->st[w] = st[w][l];
		stream_release(mb, s, now_ns());
	}
}

static struct s3_md5mb_stream *
waiting_listed(struct s3_md5mb *mb)
{
	for (struct s3_md5mb_stream *s = mb->lhead; s; s = s->next)
		if (s->waiting)
			return s;
	return NULL;
}

static void *
hasher(void *arg)
{
	struct s3_md5mb *mb = arg;

	pthread_setname_np(pthread_self(), "s3-md5mb");
	pthread_mutex_lock(&mb->lock);
	for (;;) {
		if (mb->nlisted >= mb->o.min_lanes) {
			run_x8(mb);
			continue;
		}
		if (mb->nlisted) {
			struct s3_md5mb_stream *w = waiting_listed(mb);
			uint64_t now = now_ns(),
			         due = mb->lhead->since_ns + mb->o.alone_us * 1000ull;

			if (w) { /* its owner waits (final, or a full queue): no more company */
				list_del(mb, w);
				run_serial(mb, w);
				continue;
			}
			if (now < due && !mb->stop) {
				struct timespec ts = { (time_t)(due / 1000000000ull),
					               (long)(due % 1000000000ull) };

				pthread_cond_timedwait(&mb->work, &mb->lock, &ts);
				continue;
			}
			run_serial(mb, list_pop(mb));
			continue;
		}
		if (mb->stop)
			break;
		pthread_cond_wait(&mb->work, &mb->lock);
	}
	pthread_mutex_unlock(&mb->lock);
	return NULL;
}

int
s3_md5mb_create(const struct s3_md5mb_opts *o, struct s3_md5mb **out)
{
	struct s3_md5mb *mb;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!s3_md5x8_supported())
		return -ENOTSUP;
	mb = calloc(1, sizeof(*mb));
	if (!mb)
		return -ENOMEM;
	if (o)
		mb->o = *o;
	if (!mb->o.max_queued)
		mb->o.max_queued = DEF_MAX_QUEUED;
	if (mb->o.max_queued < 64)
		mb->o.max_queued = 64;
	if (!mb->o.alone_us)
		mb->o.alone_us = DEF_ALONE_US;
	if (!mb->o.min_lanes)
		mb->o.min_lanes = DEF_MIN_LANES;
	if (mb->o.min_lanes > 8)
		mb->o.min_lanes = 8;
	pthread_mutex_init(&mb->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mb->work, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&mb->thr, NULL, hasher, mb);
	if (rc) {
		pthread_cond_destroy(&mb->work);
		pthread_mutex_destroy(&mb->lock);
		free(mb);
		return -rc;
	}
	*out = mb;
	return 0;
}

void
s3_md5mb_destroy(struct s3_md5mb *mb)
{
	if (!mb)
		return;
	pthread_mutex_lock(&mb->lock);
	mb->stop = true;
	pthread_cond_signal(&mb->work);
	pthread_mutex_unlock(&mb->lock);
	pthread_join(mb->thr, NULL);
	pthread_cond_destroy(&mb->work);
	pthread_mutex_destroy(&mb->lock);
	free(mb);
}

void
s3_md5mb_stats(struct s3_md5mb *mb, struct s3_md5mb_stats *out)
{
	pthread_mutex_lock(&mb->lock);
	*out = mb->stats;
	pthread_mutex_unlock(&mb->lock);
}

int
s3_md5mb_open(struct s3_md5mb *mb, struct s3_md5mb_stream **out)
{
	struct s3_md5mb_stream *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->mb = mb;
	s->st[0] = 0x67452301;
	s->st[1] = 0xefcdab89;
	s->st[2] = 0x98badcfe;
	s->st[3] = 0x10325476;
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_lock(&mb->lock);
	mb->nopen++;
	pthread_mutex_unlock(&mb->lock);
	*out = s;
	return 0;
}

/* Under the lock: wait until the hasher holds nothing of s (queue empty, not busy). */
static void
wait_idle(struct s3_md5mb_stream *s)
{
	while (s->head != s->tail || s->busy) {
		if (!s->waiting && s->listed) /* the hasher may be waiting for company */
			pthread_cond_signal(&s->mb->work);
		s->waiting = true;
		pthread_cond_wait(&s->cond, &s->mb->lock);
	}
	s->waiting = false;
}

/* Under the lock: queue one entry; the caller made room. */
static void
push(struct s3_md5mb_stream *s, const uint8_t *p, size_t nblk, struct zc_ref *ref)
{
	struct s3_md5mb *mb = s->mb;
	struct ent *e = &s->ring[s->tail % RING];

	if (p) {
		e->p = p;
	} else {
		memcpy(e->blk, s->carry, 64);
		e->p = e->blk;
	}
	e->nblk = nblk;
	e->ref = ref;
	if (ref)
		zc_ref_get(ref);
	s->tail++;
	s->queued += nblk * 64;
	if (!s->listed && !s->busy) {
		list_add(mb, s, now_ns());
		pthread_cond_signal(&mb->work);
	}
}

/* Top up the stream's partial carry block from the front of *p: the bytes taken (copied),
 * *p and *n moved past them. */
static size_t
carry_fill(struct s3_md5mb_stream *s, const uint8_t **p, size_t *n)
{
	size_t take = 64 - s->ncarry < *n ? 64 - s->ncarry : *n;

	memcpy(s->carry + s->ncarry, *p, take);
	s->ncarry += (unsigned)take;
	*p += take;
	*n -= take;
	return take;
}

/* The owner's serial path; returns the bytes copied into the carry block. */
static uint64_t
hash_inline(struct s3_md5mb_stream *s, const uint8_t *p, size_t n)
{
	uint64_t carried = 0;
	size_t whole;

	if (s->ncarry) {
		carried = carry_fill(s, &p, &n);
		if (s->ncarry < 64)
			return carried;
		serial_blocks(s->st, s->carry, 1);
		s->ncarry = 0;
	}
	whole = n / 64;
	if (whole)
		serial_blocks(s->st, p, whole);
	memcpy(s->carry, p + whole * 64, n % 64);
	s->ncarry = (unsigned)(n % 64);
	return carried + n % 64;
}

bool
s3_md5mb_would_queue(const struct s3_md5mb_stream *s, const struct zc_seg *seg)
{
	bool q;

	if (!seg->ref || !seg->len)
		return false;
	pthread_mutex_lock(&s->mb->lock);
	q = s->mb->nopen > 1;
	pthread_mutex_unlock(&s->mb->lock);
	return q;
}

int
s3_md5mb_update(struct s3_md5mb_stream *s, const struct zc_seg *seg)
{
	struct s3_md5mb *mb = s->mb;
	const uint8_t *p = seg->ptr;
	size_t n = seg->len, whole;
	uint64_t carried = 0;

	if (!n)
		return 0;
	s->len += n;
	pthread_mutex_lock(&mb->lock);
	/* Hashed here, on the owner's thread, after what is queued: a span borrowed for this
	 * call only, or any span while this is the only open stream (nothing to share the
	 * lanes with, and no handoff to pay). */
	if (!seg->ref || mb->nopen == 1) {
		wait_idle(s);
		pthread_mutex_unlock(&mb->lock);
		carried = hash_inline(s, p, n);
		pthread_mutex_lock(&mb->lock);
		mb->stats.inline_bytes += seg->len;
		mb->stats.carry_bytes += carried;
		pthread_mutex_unlock(&mb->lock);
		if (carried)
			s3_metric_copied(S3_COPY_MD5_CARRY, carried);
		return 0;
	}
	if (s->ncarry) /* complete the carry block first: MD5 takes bytes in order */
		carried = carry_fill(s, &p, &n);
	whole = n / 64;
	/* room: two entries at most, and the bytes under the bound (a span larger than the
	 * bound is queued alone once the queue is empty) */
	while (s->tail - s->head > RING - 2 ||
	       (s->queued && s->queued + 64 + whole * 64 > mb->o.max_queued)) {
		if (!s->waiting && s->listed)
			pthread_cond_signal(&mb->work);
		s->waiting = true;
		mb->stats.waits++;
		pthread_cond_wait(&s->cond, &mb->lock);
	}
	s->waiting = false;
	if (s->ncarry == 64) {
		push(s, NULL, 1, NULL); /* copies the carry block into the queue: counted too */
		carried += 64;
		s->ncarry = 0;
	}
	if (whole)
		push(s, p, whole, seg->ref);
	if (n % 64) { /* ncarry is 0 here: n > 0 only if the carry block filled */
		memcpy(s->carry, p + whole * 64, n % 64);
		s->ncarry = (unsigned)(n % 64);
		carried += n % 64;
	}
	mb->stats.carry_bytes += carried;
	pthread_mutex_unlock(&mb->lock);
	if (carried)
		s3_metric_copied(S3_COPY_MD5_CARRY, carried);
	return 0;
}

void
s3_md5mb_final(struct s3_md5mb_stream *s, uint8_t md5[16])
{
	uint8_t pad[128] = { 0 };
	uint64_t bits = s->len * 8;
	unsigned nb = s->ncarry < 56 ? 1 : 2;

	pthread_mutex_lock(&s->mb->lock);
	wait_idle(s);
	s->mb->nopen--;
	pthread_mutex_unlock(&s->mb->lock);
	memcpy(pad, s->carry, s->ncarry);
	pad[s->ncarry] = 0x80;
	for (int i = 0; i < 8; i++)
		pad[nb * 64 - 8 + i] = (uint8_t)(bits >> (8 * i));
	serial_blocks(s->st, pad, nb);
	for (int w = 0; w < 4; w++)
		for (int i = 0; i < 4; i++)
			md5[4 * w + i] = (uint8_t)(s->st[w] >> (8 * i));
	pthread_cond_destroy(&s->cond);
	free(s);
}

void
s3_md5mb_abort(struct s3_md5mb_stream *s)
{
	struct s3_md5mb *mb;
	struct zc_ref *refs[RING];
	unsigned n = 0;

	if (!s)
		return;
	mb = s->mb;
	pthread_mutex_lock(&mb->lock);
	s->aborting = true;
	if (s->listed)
		list_del(mb, s);
	while (s->busy) { /* the hasher finishes the span under way, then lets go */
		s->waiting = true;
		pthread_cond_wait(&s->cond, &mb->lock);
	}
	if (s->listed) /* released between our del and its end: take it off again */
		list_del(mb, s);
	while (s->head != s->tail)
		refs[n++] = ent_done(s);
	mb->nopen--;
	pthread_mutex_unlock(&mb->lock);
	put_refs(refs, n);
	pthread_cond_destroy(&s->cond);
	free(s);
}
