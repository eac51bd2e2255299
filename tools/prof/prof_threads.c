/* zest-prof's per-thread CPU: /proc/PID/task/<tid>/stat snapshots, grouped by folded name. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_threads.h"

int
prof_threads_parse_stat(const char *line, char *comm, size_t comm_len, uint64_t *utime,
                        uint64_t *stime)
{
	const char *open = strchr(line, '('), *close = strrchr(line, ')');
	unsigned long long ut, st;
	char state;
	size_t len;

	if (!open || !close || close < open || comm_len == 0)
		return -EINVAL;
	/* After the comm: state, then ten numbers, then utime and stime (fields 14, 15). */
	if (sscanf(close + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &ut,
	           &st) != 3)
		return -EINVAL;
	len = (size_t)(close - open - 1);
	if (len >= comm_len)
		len = comm_len - 1;
	memcpy(comm, open + 1, len);
	comm[len] = 0;
	*utime = ut;
	*stime = st;
	return 0;
}

void
prof_threads_fold_name(const char *comm, char *out, size_t n)
{
	size_t len = strlen(comm), keep = len;

	if (n == 0)
		return;
	while (keep > 0 && isdigit((unsigned char)comm[keep - 1]))
		keep--;
	if (keep == len) {
		snprintf(out, n, "%s", comm);
		return;
	}
	snprintf(out, n, "%.*s#", (int)keep, comm);
}

void
prof_threads_fini(struct prof_threads *s)
{
	free(s->t);
	s->t = NULL;
	s->n = s->cap = 0;
}

/* Reads one thread's stat file into s (grown as needed); a thread that has just exited is
 * skipped. */
static int
add_thread(struct prof_threads *s, pid_t pid, int tid)
{
	char path[96], line[1024], comm[PROF_THREAD_NAME_MAX];
	struct prof_thread_stat *t;
	uint64_t ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f) ||
	    prof_threads_parse_stat(line, comm, sizeof(comm), &ut, &st) < 0) {
		fclose(f);
		return 0;
	}
	fclose(f);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;

		t = realloc(s->t, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		s->t = t;
		s->cap = cap;
	}
	t = &s->t[s->n++];
	t->tid = tid;
	t->ticks = ut + st;
	prof_threads_fold_name(comm, t->name, sizeof(t->name));
	return 0;
}

int
prof_threads_snapshot(pid_t pid, struct prof_threads *s)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int rc = 0;

	s->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);

		if (*end || tid <= 0)
			continue;
		rc = add_thread(s, pid, (int)tid);
	}
	closedir(d);
	return rc < 0 ? rc : (int)s->n;
}

static const struct prof_thread_stat *
find_tid(const struct prof_threads *s, int tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].tid == tid)
			return &s->t[i];
	return NULL;
}

/* The group named name, created if there is room; else the "other" group in the last slot. */
static struct prof_thread_group *
group_of(struct prof_thread_group *groups, unsigned *n, unsigned max, const char *name)
{
	for (unsigned i = 0; i < *n; i++)
		if (!strcmp(groups[i].name, name))
			return &groups[i];
	if (*n + 1 < max) {
		snprintf(groups[*n].name, sizeof(groups[*n].name), "%s", name);
		groups[*n].cpu_s = 0;
		return &groups[(*n)++];
	}
	if (*n < max) {
		snprintf(groups[*n].name, sizeof(groups[*n].name), "other");
		groups[*n].cpu_s = 0;
		(*n)++;
	}
	return &groups[max - 1];
}

static int
by_cpu_desc(const void *a, const void *b)
{
	const struct prof_thread_group *x = a, *y = b;

	if (x->cpu_s != y->cpu_s)
		return x->cpu_s < y->cpu_s ? 1 : -1;
	return strcmp(x->name, y->name);
}

unsigned
prof_threads_delta(const struct prof_threads *before, const struct prof_threads *after,
                   double process_cpu_s, double tick_s, struct prof_thread_group *groups,
                   unsigned max)
{
	double sum = 0;
	unsigned n = 0;

	if (max == 0)
		return 0;
	for (size_t i = 0; i < after->n; i++) {
		const struct prof_thread_stat *a = &after->t[i], *b = find_tid(before, a->tid);
		uint64_t ticks = b && b->ticks <= a->ticks ? a->ticks - b->ticks : a->ticks;
		double s = (double)ticks * tick_s;

		/* A tid reused by a new thread restarts from zero: counted whole, as above. */
		group_of(groups, &n, max, a->name)->cpu_s += s;
		sum += s;
	}
	/* Each thread's figure is rounded to a tick, so only more than that is real. */
	if (isfinite(process_cpu_s) && process_cpu_s - sum > tick_s * (double)(after->n + 1))
		group_of(groups, &n, max, PROF_THREADS_EXITED)->cpu_s += process_cpu_s - sum;
	qsort(groups, n, sizeof(*groups), by_cpu_desc);
	return n;
}
