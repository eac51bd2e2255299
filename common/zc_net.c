#include <errno.h>
#include <stdio.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zc_net.h"

int
zc_hostport_split(const char *spec, char *host, size_t cap, unsigned *port)
{
	const char *colon = strrchr(spec, ':');
	size_t hl;
	char *end;
	unsigned long p;

	if (!colon || (size_t)(colon - spec) >= cap)
		return -EINVAL;
	hl = (size_t)(colon - spec);
	memcpy(host, spec, hl);
	host[hl] = '\0';
	if (host[0] == '[') { /* [::1]:9000 */
		if (hl < 2 || host[hl - 1] != ']')
			return -EINVAL;
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || p > 65535)
		return -EINVAL;
	*port = (unsigned)p;
	return 0;
}

int
zc_listen(const char *spec, int backlog, bool nonblock, unsigned *bound)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
		                  .ai_socktype = SOCK_STREAM,
		                  .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[256], ps[8];
	unsigned port;
	int fd, one = 1, err;

	if (zc_hostport_split(spec, host, sizeof(host), &port) < 0)
		return -EINVAL;
	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host[0] ? host : NULL, ps, &hints, &ai))
		return -EINVAL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0) {
		err = -errno;
		goto free_ai;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		err = -errno;
		goto close_fd;
	}
	freeaddrinfo(ai);
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                        : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
close_fd:
	close(fd);
free_ai:
	freeaddrinfo(ai);
	return err;
}
