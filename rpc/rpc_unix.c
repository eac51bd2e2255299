/*
 * rpc_unix (rpc_tls.h): the local link, gRPC over a Unix socket with gRPC's local
 * credentials. The kernel authenticates: the socket file is created 0700 under umask 077,
 * so only the owner's user (and root) can connect, and gRPC's local credentials refuse a
 * connection that is not a Unix socket. No TLS: nothing leaves the host.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "rpc_tls.h"
#include "rpc_tls_internal.h"

#define UNIX_PREFIX "unix:"

bool
rpc_unix_is_target(const char *addr)
{
	return addr && !strncmp(addr, UNIX_PREFIX, strlen(UNIX_PREFIX));
}

int
rpc_unix_channel_creds(grpc_channel_credentials **out)
{
	*out = grpc_local_credentials_create(UDS);
	return *out ? 0 : -ENOMEM;
}

/* 1: a process accepts connections on path; 0: nobody does (a stale file); -errno. */
static int
someone_listens(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	rc = rc == 0 ? 1 : errno == ECONNREFUSED ? 0 : -errno;
	close(fd);
	return rc;
}

int
rpc_unix_add_port(grpc_server *server, const char *path, char *err, size_t len)
{
	struct sockaddr_un sa;
	char target[sizeof(UNIX_PREFIX) + sizeof(sa.sun_path)];
	grpc_server_credentials *creds;
	struct stat st;
	mode_t old;
	int rc, port;

	if (!path || !*path)
		return rpc_tls_fail(err, len, -EINVAL, "no Unix socket path");
	if (strlen(path) >= sizeof(sa.sun_path))
		return rpc_tls_fail(err, len, -ENAMETOOLONG,
		                    "Unix socket path %s is over %zu bytes", path,
		                    sizeof(sa.sun_path) - 1);
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode))
			return rpc_tls_fail(err, len, -EEXIST, "%s exists and is not a socket",
			                    path);
		/* gRPC unlinks whatever is there before it binds: a second datanode on the
		 * same path must fail rather than take the first one's clients */
		rc = someone_listens(path);
		if (rc < 0)
			return rpc_tls_fail(err, len, rc, "cannot probe %s: %s", path,
			                    strerror(-rc));
		if (rc)
			return rpc_tls_fail(err, len, -EADDRINUSE, "another process serves on %s",
			                    path);
	}
	snprintf(target, sizeof(target), UNIX_PREFIX "%s", path);
	creds = grpc_local_server_credentials_create(UDS);
	if (!creds)
		return rpc_tls_fail(err, len, -ENOMEM, "gRPC refused local credentials");
	/* The socket file's mode is the authentication: it is born 0700, never wider for
	 * a moment. The umask is process-wide, so this runs at start-up only. */
	old = umask(077);
	port = grpc_server_add_http2_port(server, target, creds);
	umask(old);
	grpc_server_credentials_release(creds);
	if (port <= 0)
		return rpc_tls_fail(err, len, -EADDRINUSE, "cannot listen on %s", target);
	if (stat(path, &st)) {
		rc = -errno;
		return rpc_tls_fail(err, len, rc, "cannot stat %s after binding it: %s", path,
		                    strerror(-rc));
	}
	if (st.st_mode & 077)
		return rpc_tls_fail(err, len, -EACCES, "%s is not private to its owner (mode %o)",
		                    path, (unsigned)(st.st_mode & 0777));
	return 0;
}
