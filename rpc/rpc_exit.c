/*
 * The wait at program end for gRPC's own clean-up (rpc_shutdown_wait, rpc_client.h).
 *
 * gRPC 1.51 (src/core/lib/surface/init.cc) counts grpc_init references under its lock
 * g_init_mu. The last grpc_shutdown, when it runs on one of gRPC's own threads (a channel
 * destroyed while it reconnects drops its reference there, ~200 ms later), logs "grpc_shutdown
 * spawns clean-up thread" at debug level and hands the clean-up to a detached thread, which
 * takes g_init_mu, tears the library down (the executors last: Executor::ShutdownAll, which
 * logs "Executor::ShutdownAll() done" under the "executor" tracer) and only then lets the
 * lock go. grpc_is_initialized() takes the same lock, so while a clean-up runs it blocks, and
 * once it answers 0 the clean-up is over.
 *
 * The C API has no callback for that moment, but it logs through gpr_log, and gpr_set_log_function
 * takes a hook: at exit only, the hook is installed, debug verbosity and the executor tracer
 * are switched on, and every line gRPC logs (from whatever thread) bumps a counter under a
 * condition variable. The waiter re-asks grpc_is_initialized() after each line, never on a
 * timer; the deadline only bounds a library that never finishes. Lines the process would have
 * printed anyway (at or above GRPC_VERBOSITY, default ERROR) still go to stderr.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include "rpc_client.h"
#include "zc.h"

static pthread_mutex_t exit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cond;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static uint64_t exit_lines; /* under exit_lock: lines gRPC logged since the hook */
static gpr_log_severity exit_show = GPR_LOG_SEVERITY_ERROR; /* GRPC_VERBOSITY's */

static void
exit_init(void)
{
	pthread_condattr_t a;
	const char *v = getenv("GRPC_VERBOSITY");

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&exit_cond, &a);
	pthread_condattr_destroy(&a);
	if (v && !strcasecmp(v, "DEBUG"))
		exit_show = GPR_LOG_SEVERITY_DEBUG;
	else if (v && !strcasecmp(v, "INFO"))
		exit_show = GPR_LOG_SEVERITY_INFO;
}

/* gRPC's log function from the wait on: any thread, gRPC's lock possibly held. */
static void
exit_log(gpr_log_func_args *a)
{
	if (a->severity >= exit_show)
		zc_log(a->severity == GPR_LOG_SEVERITY_ERROR ? ZC_LEVEL_ERR : ZC_LEVEL_INFO, "grpc",
		       "%s:%d %s", a->file, a->line, a->message);
	pthread_mutex_lock(&exit_lock);
	exit_lines++;
	pthread_cond_broadcast(&exit_cond);
	pthread_mutex_unlock(&exit_lock);
}

static uint64_t
lines_now(void)
{
	uint64_t n;

	pthread_mutex_lock(&exit_lock);
	n = exit_lines;
	pthread_mutex_unlock(&exit_lock);
	return n;
}

int
rpc_shutdown_wait(unsigned timeout_ms)
{
	uint64_t start = zc_now_ns(), wakes = 0;
	struct timespec dl;
	bool done;

	pthread_once(&exit_once, exit_init);
	if (!grpc_is_initialized())
		return 1;
	zc_deadline(&dl, CLOCK_MONOTONIC, (uint64_t)timeout_ms * 1000000u);
	gpr_set_log_function(exit_log);
	gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
	/* only while gRPC is still up: its tracer list is the library's */
	grpc_tracer_set_enabled("executor", 1);
	for (;;) {
		uint64_t seen = lines_now();
		int rc = 0;

		/* blocks while a clean-up holds gRPC's lock; 0 once it let go */
		if (!grpc_is_initialized())
			break;
		pthread_mutex_lock(&exit_lock);
		while (exit_lines == seen && rc == 0)
			rc = pthread_cond_timedwait(&exit_cond, &exit_lock, &dl);
		pthread_mutex_unlock(&exit_lock);
		if (rc)
			break; /* the deadline: a last look below */
		wakes++;
	}
	done = !grpc_is_initialized();
	if (!done) /* gRPC still up: put its logging back as it was */
		grpc_tracer_set_enabled("executor", 0);
	gpr_set_log_verbosity(exit_show);
	ZC_DBG("rpc", "grpc_cleanup_wait_ms=%llu done=%d log_wakeups=%llu",
	       (unsigned long long)((zc_now_ns() - start) / 1000000), done,
	       (unsigned long long)wakes);
	if (!done)
		ZC_WARN("rpc",
		        "gRPC still initialized %u ms after the last rpc object went: "
		        "exiting under its clean-up",
		        timeout_ms);
	return done;
}
