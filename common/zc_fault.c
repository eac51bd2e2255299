/* The fault-point registry (zc_fault.h): compiled in test builds only (-Dtest_faults). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "zc.h"
#include "zc_fault.h"

#define PAUSE_MAX_NS (120ull * 1000000000u) /* a stuck test fails instead of hanging */

static const char *const names[ZC_FP_COUNT] = {
	[ZC_FP_DRIVE_WRITE] = "drive.write",
	[ZC_FP_META_TXN] = "meta.txn",
	[ZC_FP_ADM_LATENCY] = "admission.latency",
	[ZC_FP_PEER_SEND] = "peer.send",
	[ZC_FP_DN_COMPOSE] = "dn.compose",
	[ZC_FP_DN_READ] = "dn.read",
	[ZC_FP_MPU_LISTED] = "mpu.complete-listed",
	[ZC_FP_MPU_MARKED] = "mpu.complete-marked",
	[ZC_FP_MPU_COMPOSED] = "mpu.after-compose",
	[ZC_FP_MPU_ABORT] = "mpu.abort-marked",
	[ZC_FP_S3_COND_SEEN] = "s3.cond-seen",
};

struct rule {
	struct rule *next;
	enum zc_fault_point p;
	char *inst; /* NULL: every instance */
	struct zc_fault f;
	unsigned hits, fired;
};

atomic_uint zc_fault_armed[ZC_FP_COUNT];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct rule *rules;

static void
rule_free(struct rule *r)
{
	free(r->inst);
	free((char *)r->f.path);
	free(r);
}

/* Under mu: unlink and free *pr. */
static void
rule_drop(struct rule **pr)
{
	struct rule *r = *pr;

	*pr = r->next;
	atomic_fetch_sub_explicit(&zc_fault_armed[r->p], 1, memory_order_relaxed);
	rule_free(r);
}

static bool
inst_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int
zc_fault_point_of(const char *name)
{
	for (int i = 0; i < ZC_FP_COUNT; i++)
		if (!strcmp(names[i], name))
			return i;
	return -EINVAL;
}

int
zc_fault_arm(enum zc_fault_point p, const char *inst, const struct zc_fault *f)
{
	struct rule *r, **pr;

	if ((unsigned)p >= ZC_FP_COUNT || !f || f->kind == ZC_FAULT_NONE ||
	    (f->kind == ZC_FAULT_PAUSE && !f->path) || (f->kind == ZC_FAULT_CALL && !f->fn))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->p = p;
	r->f = *f;
	r->f.path = NULL;
	if (!r->f.from)
		r->f.from = 1;
	if ((inst && !(r->inst = strdup(inst))) || (f->path && !(r->f.path = strdup(f->path)))) {
		rule_free(r);
		return -ENOMEM;
	}
	pthread_mutex_lock(&mu);
	for (pr = &rules; *pr; pr = &(*pr)->next)
		if ((*pr)->p == p && inst_eq((*pr)->inst, inst)) {
			rule_drop(pr);
			break;
		}
	r->next = rules;
	rules = r;
	atomic_fetch_add_explicit(&zc_fault_armed[p], 1, memory_order_relaxed);
	pthread_mutex_unlock(&mu);
	return 0;
}

void
zc_fault_disarm(enum zc_fault_point p, const char *inst)
{
	pthread_mutex_lock(&mu);
	for (struct rule **pr = &rules; *pr;)
		if ((*pr)->p == p && (!inst || inst_eq((*pr)->inst, inst)))
			rule_drop(pr);
		else
			pr = &(*pr)->next;
	pthread_mutex_unlock(&mu);
}

void
zc_fault_clear(void)
{
	pthread_mutex_lock(&mu);
	while (rules)
		rule_drop(&rules);
	pthread_mutex_unlock(&mu);
}

unsigned
zc_fault_fired(enum zc_fault_point p, const char *inst)
{
	unsigned n = 0;

	pthread_mutex_lock(&mu);
	for (struct rule *r = rules; r; r = r->next)
		if (r->p == p && inst_eq(r->inst, inst))
			n = r->fired;
	pthread_mutex_unlock(&mu);
	return n;
}

uint64_t
zc_fault_level_ns(enum zc_fault_point p)
{
	uint64_t ns = 0;

	pthread_mutex_lock(&mu);
	for (struct rule *r = rules; r; r = r->next)
		if (r->p == p && r->f.kind == ZC_FAULT_DELAY && r->f.delay_ns > ns)
			ns = r->f.delay_ns;
	pthread_mutex_unlock(&mu);
	return ns;
}

/* Create path.reached, then wait while path exists: on inotify events in its folder, at
 * most PAUSE_MAX_NS. */
static void
pause_at(const char *point, const char *path)
{
	char reached[PATH_MAX], dir[PATH_MAX];
	uint64_t end = zc_now_ns() + PAUSE_MAX_NS;
	const char *slash = strrchr(path, '/');
	int fd, in;

	if (snprintf(reached, sizeof(reached), "%s.reached", path) >= (int)sizeof(reached))
		return;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path), path);
	in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (in >= 0 && inotify_add_watch(in, dir, IN_DELETE | IN_MOVED_FROM) < 0) {
		close(in);
		in = -1;
	}
	fd = open(reached, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	ZC_WARN("fault", "point=%s pause=%s (test build)", point, path);
	while (access(path, F_OK) == 0) {
		uint64_t now = zc_now_ns();
		char buf[4096];

		if (now >= end) {
			ZC_ERR("fault", "point=%s pause=%s not released in %llu s: going on", point,
			       path, (unsigned long long)(PAUSE_MAX_NS / 1000000000u));
			break;
		}
		if (in < 0) { /* no inotify: a test build may poll */
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
			continue;
		}
		(void)poll(&(struct pollfd){ .fd = in, .events = POLLIN }, 1,
		           (int)((end - now) / 1000000u) + 1);
		while (read(in, buf, sizeof(buf)) > 0)
			;
	}
	if (in >= 0)
		close(in);
}

static int
hit(enum zc_fault_point p, const char *inst, unsigned seq)
{
	struct zc_fault f;
	struct rule **pr, *r;
	char *path = NULL;
	unsigned n;

	pthread_mutex_lock(&mu);
	for (pr = &rules; *pr; pr = &(*pr)->next)
		if ((*pr)->p == p && (!(*pr)->inst || (inst && !strcmp((*pr)->inst, inst))))
			break;
	r = *pr;
	if (!r) {
		pthread_mutex_unlock(&mu);
		return 0;
	}
	n = seq ? seq : ++r->hits;
	if (n < r->f.from || (r->f.count && n - r->f.from >= r->f.count)) {
		pthread_mutex_unlock(&mu);
		return 0;
	}
	f = r->f;
	r->fired++;
	if (f.kind == ZC_FAULT_PAUSE)
		path = strdup(f.path);
	if (!seq && f.count && n - f.from + 1 >= f.count)
		rule_drop(pr); /* spent */
	pthread_mutex_unlock(&mu);
	switch (f.kind) {
	case ZC_FAULT_DELAY:
		nanosleep(&(struct timespec){ .tv_sec = (time_t)(f.delay_ns / 1000000000u),
		                              .tv_nsec = (long)(f.delay_ns % 1000000000u) },
		          NULL);
		return 0;
	case ZC_FAULT_PAUSE:
		if (path)
			pause_at(names[p], path);
		free(path);
		return 0;
	case ZC_FAULT_CALL:
		f.fn(f.arg, n);
		return 0;
	case ZC_FAULT_ERR:
		return f.err ? f.err : -EIO;
	case ZC_FAULT_DROP:
	case ZC_FAULT_RESET:
		return (int)f.kind;
	case ZC_FAULT_NONE:
		break;
	}
	return 0;
}

int
zc_fault_hit(enum zc_fault_point p, const char *inst, unsigned seq)
{
	return hit(p, inst, seq);
}

int
zc_fault_hit_idx(enum zc_fault_point p, unsigned idx, unsigned seq)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%u", idx);
	return hit(p, buf, seq);
}

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EIO", EIO },       { "ENOSPC", ENOSPC },         { "ENOMEM", ENOMEM },
	{ "EAGAIN", EAGAIN }, { "ECANCELED", ECANCELED },   { "EBADMSG", EBADMSG },
	{ "ENOENT", ENOENT }, { "ETIMEDOUT", ETIMEDOUT },   { "EROFS", EROFS },
};

static int
parse_err(const char *s, int *err)
{
	char *end;
	long v;

	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (!strcasecmp(s, errnames[i].name)) {
			*err = -errnames[i].err;
			return 0;
		}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 4095)
		return -EINVAL;
	*err = -(int)v;
	return 0;
}

static int
parse_uint(const char *s, size_t n, unsigned *out)
{
	char buf[16], *end;
	unsigned long v;

	if (!n || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno || *end || !v || v > UINT32_MAX)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* One RULE (NUL-terminated, writable) into its point, instance and action. */
static int
parse_rule(char *s, enum zc_fault_point *p, char **inst, struct zc_fault *f)
{
	char *eq = strchr(s, '='), *act, *arg, *at, *star, *slash;
	size_t nl;
	int pt;

	memset(f, 0, sizeof(*f));
	*inst = NULL;
	if (!eq)
		return -EINVAL;
	*eq = '\0';
	act = eq + 1;
	at = strchr(s, '@');
	star = strchr(s, '*');
	if (star && star[1] && parse_uint(star + 1, strlen(star + 1), &f->count) < 0)
		return -EINVAL;
	if (star && !star[1])
		return -EINVAL;
	if (at && parse_uint(at + 1, (star && star > at ? (size_t)(star - at) : strlen(at)) - 1,
	                     &f->from) < 0)
		return -EINVAL;
	if (at && !star)
		f->count = 1;
	nl = strcspn(s, "/@*");
	slash = s[nl] == '/' ? s + nl : NULL;
	if (slash) {
		size_t il = strcspn(slash + 1, "@*");

		if (!il)
			return -EINVAL;
		slash[1 + il] = '\0';
		*inst = slash + 1;
	}
	s[nl] = '\0';
	pt = zc_fault_point_of(s);
	if (pt < 0)
		return -EINVAL;
	*p = (enum zc_fault_point)pt;
	arg = strchr(act, ':');
	if (arg)
		*arg++ = '\0';
	if (!strcmp(act, "delay") && arg) {
		f->kind = ZC_FAULT_DELAY;
		return zc_parse_duration_ns(arg, &f->delay_ns);
	}
	if (!strcmp(act, "pause") && arg && *arg) {
		f->kind = ZC_FAULT_PAUSE;
		f->path = arg;
		return 0;
	}
	if (!strcmp(act, "err") && arg) {
		f->kind = ZC_FAULT_ERR;
		return parse_err(arg, &f->err);
	}
	if (arg)
		return -EINVAL;
	if (!strcmp(act, "eio")) {
		f->kind = ZC_FAULT_ERR;
		f->err = -EIO;
	} else if (!strcmp(act, "drop")) {
		f->kind = ZC_FAULT_DROP;
	} else if (!strcmp(act, "reset")) {
		f->kind = ZC_FAULT_RESET;
	} else {
		return -EINVAL;
	}
	return 0;
}

int
zc_fault_parse(const char *spec)
{
	struct {
		enum zc_fault_point p;
		char *inst;
		struct zc_fault f;
	} *v = NULL;
	char *buf, *save = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!spec)
		return -EINVAL;
	buf = strdup(spec);
	if (!buf)
		return -ENOMEM;
	for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *copy = item;

		if (n == cap) {
			void *nv = realloc(v, (cap = cap ? 2 * cap : 4) * sizeof(*v));

			if (!nv) {
				rc = -ENOMEM;
				goto out;
			}
			v = nv;
		}
		if (parse_rule(copy, &v[n].p, &v[n].inst, &v[n].f) < 0) {
			ZC_ERR("fault", "bad fault rule in '%s' (want POINT[/INSTANCE][@FROM][*COUNT]="
			                "delay:DURATION|drop|reset|eio|err:ERRNO|pause:PATH)",
			       spec);
			rc = -EINVAL;
			goto out;
		}
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		rc = zc_fault_arm(v[i].p, v[i].inst, &v[i].f);
		if (rc < 0)
			goto out;
		ZC_WARN("fault", "point=%s instance=%s armed (test build)", names[v[i].p],
		        v[i].inst ? v[i].inst : "*");
	}
	rc = (int)n;
out:
	free(v);
	free(buf);
	return rc;
}

int
zc_fault_env(void)
{
	const char *v = getenv("ZEST_FAULTS");

	return v && *v ? zc_fault_parse(v) : 0;
}
