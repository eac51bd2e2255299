/* The store's commit thread: metadata commits, unlinks and callbacks, off the drive
 * threads, queued jobs of one kind batched together. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_store.h"
#include "zc.h"

void
dn_store_defer(struct dn_store *s, struct dn_job *job)
{
	job->next = NULL;
	pthread_mutex_lock(&s->commit_lock);
	if (s->jtail)
		s->jtail->next = job;
	else
		s->jhead = job;
	s->jtail = job;
	s->jobs_deferred++;
	pthread_cond_signal(&s->commit_cond);
	pthread_mutex_unlock(&s->commit_lock);
}

/* The batch function a run started with (the job's own for the first one). */
static void (*batch_fn_of(struct dn_job **batch, size_t n, struct dn_job *job))(struct dn_job **,
                                                                                size_t)
{
	return n ? batch[0]->batch : job->batch;
}

static void *
commit_main(void *arg)
{
	struct dn_store *s = arg;

	pthread_mutex_lock(&s->commit_lock);
	for (;;) {
		struct dn_job *job = s->jhead;

		if (!job) {
			if (s->commit_stop)
				break;
			pthread_cond_wait(&s->commit_cond, &s->commit_lock);
			continue;
		}
		/* Take the whole queue: commits that piled up during one sync share the next. */
		s->jhead = s->jtail = NULL;
		pthread_mutex_unlock(&s->commit_lock);
		while (job) {
			struct dn_job *batch[DN_BATCH_MAX];
			size_t n = 0;

			if (!job->batch) {
				struct dn_job *next = job->next;

				job->fn(job);
				job = next;
				continue;
			}
			while (job && n < DN_BATCH_MAX &&
			       job->batch == batch_fn_of(batch, n, job)) {
				batch[n++] = job;
				job = job->next;
			}
			batch[0]->batch(batch, n);
		}
		pthread_mutex_lock(&s->commit_lock);
	}
	pthread_mutex_unlock(&s->commit_lock);
	return NULL;
}

int
dn_store_commit_start(struct dn_store *s)
{
	int err = -pthread_create(&s->commit_thread, NULL, commit_main, s);

	if (err)
		return err;
	pthread_setname_np(s->commit_thread, "dn-commit");
	s->commit_ok = true;
	return 0;
}

void
dn_store_commit_stop(struct dn_store *s)
{
	if (!s->commit_ok)
		return;
	pthread_mutex_lock(&s->commit_lock);
	s->commit_stop = true;
	pthread_cond_signal(&s->commit_cond);
	pthread_mutex_unlock(&s->commit_lock);
	pthread_join(s->commit_thread, NULL);
	s->commit_ok = false;
}
