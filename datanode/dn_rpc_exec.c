/*
 * dn_rpc_exec: the executor the binding's streaming calls share (Write and WriteCell,
 * and the deferred DeleteCells/CommitCells). Each call has its own job queue; a call with
 * jobs sits once on the ready list and one worker at a time runs its jobs in order, then
 * sends it to the tail of the list, so calls take turns. A call may also be parked (its
 * first job put back, no worker holding it) until dn_exec_ready brings it back.
 *
 * Flow control: a call's queued data bytes are counted here; the call pauses receiving at
 * call_cap and the worker resumes it at half that (or at once when the call has failed).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dn_rpc_internal.h"

/* Under ex->mu: c (scheduled) to the ready list; an urgent call goes before every call
 * that is not (urgent ones keep their order). */
static void
ready_append(struct dn_exec *ex, struct dn_exec_call *c)
{
	struct dn_exec_call **at;

	if (c->urgent)
		at = ex->urgent_last ? &ex->urgent_last->next_ready : &ex->ready_head;
	else
		at = ex->ready_tail ? &ex->ready_tail->next_ready : &ex->ready_head;
	c->next_ready = *at;
	*at = c;
	if (!c->next_ready)
		ex->ready_tail = c;
	if (c->urgent)
		ex->urgent_last = c;
	pthread_cond_signal(&ex->cond);
}

void
dn_exec_ready(struct dn_exec *ex, struct dn_exec_call *c)
{
	ready_append(ex, c);
}

void
dn_exec_push(struct dn_exec *ex, struct dn_exec_call *c, struct dn_exec_job *j)
{
	j->next = NULL;
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	if (c->scheduled)
		return; /* on the ready list, held by a worker, or parked */
	c->scheduled = true;
	ready_append(ex, c);
}

void
dn_exec_park(struct dn_exec_call *c, struct dn_exec_job *j)
{
	j->next = c->head;
	c->head = j;
	if (!c->tail)
		c->tail = j;
}

void
dn_exec_set_err(struct dn_exec *ex, struct dn_exec_call *c, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&ex->mu);
	c->err = err;
	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&ex->mu);
}

int
dn_exec_err(struct dn_exec *ex, struct dn_exec_call *c)
{
	int err;

	pthread_mutex_lock(&ex->mu);
	err = c->err;
	pthread_mutex_unlock(&ex->mu);
	return err;
}

void
dn_exec_fail(struct dn_exec *ex, struct dn_exec_call *c, int err, const char *fmt, ...)
{
	char msg[RPC_STATUS_MSG_MAX];
	int recorded = dn_exec_err(ex, c);
	va_list ap;

	if (recorded) {
		rpc_write_fail(c->w, recorded, "%s", c->errmsg);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rpc_write_fail(c->w, err, "%s", msg);
}

/* ------------------------------------------------------------------ data jobs */

/* A data job: the received segments, one zc_ref each, from the callback until it ran. */
struct data_job {
	struct dn_exec_job ej; /* is_data */
	struct dn_exec_data d;
};

static void
data_job_free(struct data_job *j)
{
	for (size_t i = 0; i < j->d.n; i++)
		if (j->d.segs[i].ref)
			zc_ref_put(j->d.segs[i].ref);
	free(j->d.segs);
	free(j);
}

int
dn_exec_queue_data(struct dn_exec *ex, struct dn_exec_call *c, uint64_t off,
                   const struct zc_seg *segs, size_t n, size_t len, uint32_t crc32c)
{
	struct data_job *j;
	int rc;

	pthread_mutex_lock(&ex->mu);
	if (c->err) {
		/* Doomed: the data is dropped; with no job left to run and no callback to come
		 * after ours, the caller ends the call. */
		rc = c->scheduled ? DN_EXEC_DROPPED : DN_EXEC_FAIL_HERE;
		pthread_mutex_unlock(&ex->mu);
		return rc;
	}
	pthread_mutex_unlock(&ex->mu);
	j = calloc(1, sizeof(*j));
	if (j)
		j->d.segs = malloc(n * sizeof(*j->d.segs));
	pthread_mutex_lock(&ex->mu);
	if (!j || !j->d.segs) {
		if (j)
			free(j);
		if (!c->err) {
			c->err = -ENOMEM;
			snprintf(c->errmsg, sizeof(c->errmsg), "out of memory");
		}
		pthread_mutex_unlock(&ex->mu);
		return DN_EXEC_DROPPED;
	}
	j->ej.is_data = true;
	j->d.off = off;
	j->d.len = len;
	j->d.crc32c = crc32c;
	j->d.n = n;
	for (size_t i = 0; i < n; i++) {
		j->d.segs[i] = segs[i];
		if (segs[i].ref)
			zc_ref_get(segs[i].ref);
	}
	dn_exec_push(ex, c, &j->ej);
	c->queued += len;
	if (c->queued >= ex->call_cap && !c->paused) {
		/* Pause before anyone can see c->paused: a worker that drains the queue at
		 * once resumes the call, and a pause landing after that resume stopped the
		 * call for good (a Write hung with --call-queue-cap below one message).
		 * Lock order ex->mu -> call lock: the rpc layer calls us unlocked. */
		c->paused = true;
		rpc_write_pause(c->w);
	}
	pthread_mutex_unlock(&ex->mu);
	return DN_EXEC_QUEUED;
}

/* On the worker holding c: the call's run_data, then resume c below half the cap. */
static void
run_data_job(struct dn_exec *ex, struct dn_exec_call *c, struct data_job *j)
{
	bool resume;

	c->run_data(c, &j->d);
	pthread_mutex_lock(&ex->mu);
	c->queued -= j->d.len;
	resume = c->paused && (c->queued <= ex->call_cap / 2 || c->err);
	if (resume)
		c->paused = false;
	pthread_mutex_unlock(&ex->mu);
	data_job_free(j);
	/* Still scheduled: nobody else can finish the call meanwhile. */
	if (resume)
		rpc_write_resume(c->w);
}

/* ------------------------------------------------------------------ workers */

static void *
worker(void *arg)
{
	struct dn_exec *ex = arg;

	pthread_mutex_lock(&ex->mu);
	for (;;) {
		struct dn_exec_call *c;
		struct dn_exec_job *j;

		while (!ex->ready_head && !ex->stop)
			pthread_cond_wait(&ex->cond, &ex->mu);
		c = ex->ready_head;
		if (!c)
			break; /* stopping, and every call was finished */
		ex->ready_head = c->next_ready;
		if (!ex->ready_head)
			ex->ready_tail = NULL;
		if (ex->urgent_last == c)
			ex->urgent_last = NULL; /* the urgent ones come first: none is left */
		j = c->head;
		c->head = j->next;
		if (!c->head)
			c->tail = NULL;
		pthread_mutex_unlock(&ex->mu);
		if (j->is_data) {
			run_data_job(ex, c, dn_container_of(j, struct data_job, ej));
		} else if (c->run(c, j) != DN_EXEC_NEXT) {
			pthread_mutex_lock(&ex->mu);
			continue; /* c is gone, or parked: no longer this worker's */
		}
		pthread_mutex_lock(&ex->mu);
		c->scheduled = false;
		if (c->head) {
			c->scheduled = true;
			ready_append(ex, c); /* to the tail: calls take turns */
		}
	}
	pthread_mutex_unlock(&ex->mu);
	return NULL;
}

int
dn_exec_start(struct dn_exec *ex, const char *name, unsigned n_threads, size_t call_cap)
{
	memset(ex, 0, sizeof(*ex));
	pthread_mutex_init(&ex->mu, NULL);
	pthread_cond_init(&ex->cond, NULL);
	ex->call_cap = call_cap;
	ex->started = true;
	ex->threads = calloc(n_threads, sizeof(pthread_t));
	if (!ex->threads)
		return -ENOMEM;
	for (; ex->n_threads < n_threads; ex->n_threads++) {
		if (pthread_create(&ex->threads[ex->n_threads], NULL, worker, ex))
			return -ENOMEM; /* dn_exec_stop joins the ones started */
		pthread_setname_np(ex->threads[ex->n_threads], name);
	}
	return 0;
}

void
dn_exec_stop(struct dn_exec *ex)
{
	if (!ex->started)
		return;
	pthread_mutex_lock(&ex->mu);
	ex->stop = true;
	pthread_cond_broadcast(&ex->cond);
	pthread_mutex_unlock(&ex->mu);
	for (unsigned i = 0; i < ex->n_threads; i++)
		pthread_join(ex->threads[i], NULL);
	free(ex->threads);
	pthread_mutex_destroy(&ex->mu);
	pthread_cond_destroy(&ex->cond);
	ex->started = false;
}
