/*
 * The local link (rpc/rpc_unix.c) over real gRPC: a server on 127.0.0.1:0 that also
 * serves a Unix socket in a temp dir, clients with "unix:PATH" targets.
 *  - Calls work without any TLS settings and puts through the zero-copy marshaller copy
 *    nothing; the socket file is private (0700) and gone after the server stops.
 *  - Another user cannot connect (when the test runs as root and can become nobody).
 *  - Refusals: a path a live server holds, a file that is not a socket, a path over
 *    sun_path's size; a stale socket file is replaced. A TCP target still needs TLS.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_test_sink.h"
#include "rpc_stats.h"
#include "zc.h"

static char dir[64], sock[100], target[120];

struct env {
	struct sink sink;
	struct rpc_server *srv;
};

static int
env_up(struct env *e, const char *unix_path)
{
	struct rpc_server_opts so = { .listen = "127.0.0.1:0",
		                      .tls.insecure = true,
		                      .unix_socket = unix_path };
	struct rpc_server_handlers h;
	int rc;

	sink_init(&e->sink, true, false);
	sink_handlers(&e->sink, &h);
	rc = rpc_server_create(&so, &h, &e->srv);
	if (rc)
		sink_fini(&e->sink);
	return rc;
}

static void
env_down(struct env *e)
{
	rpc_server_destroy(e->srv, 1000);
	sink_fini(&e->sink);
	assert_int_equal(rpc_live_buffers(), 0);
	assert_int_equal(zc_ref_live(), 0);
	assert_int_equal(atomic_load(&e->sink.bad_bytes), 0);
}

static int
create_bucket(struct rpc_client *cl, struct rpc_status *st)
{
	union rpc_unary_req q = { .bucket = { .bucket = "b" } };
	struct rpc_unary_resp resp;
	int rc = rpc_client_call(cl, RPC_CREATE_BUCKET, &q, &resp, st);

	rpc_unary_resp_fini(&resp);
	return rc;
}

static void
test_local_calls(void **state)
{
	static const size_t sizes[] = { 1, 1000003, 9u << 20 };
	struct rpc_client_opts co = { .target = target }; /* no TLS settings at all */
	struct rpc_status st;
	struct rpc_client *cl;
	uint64_t total = 0, received, copied;
	struct stat sb;
	struct env e;

	(void)state;
	assert_int_equal(env_up(&e, sock), 0);
	assert_int_equal(lstat(sock, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(rpc_client_create(&co, &cl), 0);
	assert_int_equal(create_bucket(cl, &st), 0);
	assert_int_equal(sink_put_sizes(cl, "unix", sizes, 3, &received, &copied), 0);
	for (size_t i = 0; i < 3; i++)
		total += sizes[i];
	assert_int_equal(received, total);
	assert_int_equal(copied, 0);
	assert_int_equal(atomic_load(&e.sink.committed), 3);
	rpc_client_destroy(cl);
	env_down(&e);
	assert_int_equal(lstat(sock, &sb), -1); /* gRPC removed it */
	assert_int_equal(errno, ENOENT);
}

/* connect(2) to path as uid/gid 65534 (nobody) in a child: its errno, 0 if it
 * connected, or -1 when the test cannot change users. */
static int
connect_as_nobody(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int status, fd;
	pid_t pid;

	if (geteuid() != 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(255);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		_exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

static void
test_other_user_refused(void **state)
{
	struct env e;
	int rc;

	(void)state;
	/* the directory lets anyone reach the file: its own mode must stop them */
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(env_up(&e, sock), 0);
	rc = connect_as_nobody();
	env_down(&e);
	if (rc < 0)
		skip();
	assert_int_equal(rc, EACCES);
}

static void
test_refusals(void **state)
{
	struct rpc_client_opts co = { .target = "127.0.0.1:1" };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct rpc_client *cl;
	struct env a, b;
	char other[120], longp[200];
	struct stat sb;
	int fd;

	(void)state;
	/* a live server keeps its path; the second one fails cleanly */
	assert_int_equal(env_up(&a, sock), 0);
	assert_int_equal(env_up(&b, sock), -EADDRINUSE);
	assert_int_equal(lstat(sock, &sb), 0);
	env_down(&a);

	/* a file that is not a socket is never removed */
	snprintf(other, sizeof(other), "%s/not-a-socket", dir);
	fd = open(other, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(env_up(&b, other), -EEXIST);
	assert_int_equal(lstat(other, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));

	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(env_up(&b, longp), -ENAMETOOLONG);

	/* a stale socket nobody serves (a datanode killed with SIGKILL) is replaced */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(env_up(&a, sock), 0);
	env_down(&a);

	/* the local link changes nothing for TCP: no TLS settings is still an error */
	assert_int_equal(rpc_client_create(&co, &cl), -EINVAL);
	assert_true(rpc_unix_is_target("unix:/x") && rpc_unix_is_target("unix:rel/x"));
	assert_false(rpc_unix_is_target("127.0.0.1:7480") || rpc_unix_is_target(NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_calls),
		cmocka_unit_test(test_other_user_refused),
		cmocka_unit_test(test_refusals),
	};
	char cmd[200];
	int rc;

	zc_log_init();
	snprintf(dir, sizeof(dir), "/tmp/zest-unix-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(sock, sizeof(sock), "%s/dn.sock", dir);
	snprintf(target, sizeof(target), "unix:%s", sock);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		rc = rc ? rc : 1;
	return rc;
}
