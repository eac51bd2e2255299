/*
 * The wait at program end (rpc_shutdown_wait, rpc/rpc_exit.c) against Debian's libgrpc: a
 * client whose channels tried a dead port and are destroyed while they wait to reconnect
 * lets go of gRPC later, on a gRPC thread, and the library then cleans up on a detached
 * thread of its own. The wait must see that clean-up end (gRPC no longer initialized) by
 * its event, a line gRPC logs, well inside a deadline no healthy run comes near. Rounds
 * with one and with several channels; the library is initialized again for each. Also:
 * with gRPC not initialized at all the wait answers at once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/grpc.h>

#include "rpc_client.h"
#include "t_check.h"
#include "zc.h"
#include "zc_err.h"

#define GENEROUS_MS 60000 /* a bound for a broken library, not a speed */

/* A loopback port nobody listens on: bound, then closed. */
static unsigned
dead_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* One round: returns whether the clean-up was left to gRPC's threads (the case the wait is
 * for) when the client was gone. */
static bool
round_trip(unsigned channels)
{
	char target[64];
	struct rpc_client_opts o = { .target = target, .channels = channels };
	struct rpc_client *c;
	bool deferred;

	snprintf(target, sizeof(target), "127.0.0.1:%u", dead_port());
	o.tls.insecure = true;
	CHECK_EQ(rpc_client_create(&o, &c), 0);
	/* every channel tries, fails and goes into its reconnect backoff */
	CHECK(zc_err_is(rpc_client_connect(c, 100), ZC_UNAVAILABLE));
	rpc_client_destroy(c);
	deferred = grpc_is_initialized();
	CHECK_EQ(rpc_shutdown_wait(GENEROUS_MS), 1);
	CHECK(!grpc_is_initialized());
	return deferred;
}

int
main(void)
{
	unsigned deferred = 0, rounds = 0;

	zc_log_init();
	/* nothing to wait for */
	CHECK(!grpc_is_initialized());
	CHECK_EQ(rpc_shutdown_wait(GENEROUS_MS), 1);
	for (unsigned ch = 1; ch <= 4; ch *= 2)
		for (int i = 0; i < 2; i++, rounds++)
			deferred += round_trip(ch);
	/* The destroyed channels' last work is on gRPC's timers (their backoff), so the
	 * clean-up was gRPC's in practically every round; one is enough to have tested it. */
	fprintf(stderr, "rounds=%u deferred=%u\n", rounds, deferred);
	CHECK(deferred >= 1);
	printf("test_rpc_exit: ok\n");
	return 0;
}
