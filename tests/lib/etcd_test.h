/*
 * A real etcd for tests: t_etcd_start launches n members (etcd 3.4, /usr/bin/etcd or
 * $ZEST_ETCD) on 127.0.0.1 with free ports and data dirs under /dev/shm (etcd 3.4 has no
 * --unsafe-no-fsync; on tmpfs an fsync costs nothing), fast raft timers (heartbeat 50 ms,
 * election 500 ms, so the shortest lease is 1 s) and each member's log in its dir.
 * Members die with the test (PR_SET_PDEATHSIG). t_etcd_stop kills them and removes the
 * dirs; the next start removes those of tests that died before (t_etcd_sweep). A test skips (exit
 * 77) when t_etcd_available() is false (t_etcd_require).
 *
 * t_etcd_start_tls serves clients over https with mTLS from PEM files in tls_dir (made by
 * t_tls_make: ca.pem, server.pem/.key for IP 127.0.0.1, client.pem/.key), the peers stay
 * on plain http.
 */
#ifndef ZEST_TEST_ETCD_H
#define ZEST_TEST_ETCD_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_check.h"

#define T_ETCD_MAX 3

struct t_etcd {
	unsigned n;
	char root[PATH_MAX];
	pid_t pid[T_ETCD_MAX];
	int client_port[T_ETCD_MAX], peer_port[T_ETCD_MAX];
	char endpoints[256]; /* "127.0.0.1:P1,127.0.0.1:P2,..." for cl_etcd_create */
};

/* A CA, a server certificate for IP 127.0.0.1 and a client certificate in dir, with the
 * openssl command line tool; false if openssl is missing. */
static inline bool
t_tls_make(const char *dir)
{
	char cmd[4096];

	if (system("openssl version >/dev/null 2>&1") != 0)
		return false;
	snprintf(cmd, sizeof(cmd),
	         "set -e; cd '%s'; k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';"
	         "openssl req -x509 $k -keyout ca.key -out ca.pem -days 2 -subj /CN=zest-test-ca;"
	         "printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n'"
	         " > server.ext;"
	         "printf 'extendedKeyUsage=clientAuth\n' > client.ext;"
	         "for n in server client; do"
	         " openssl req -new $k -keyout $n.key -out $n.csr -subj /CN=zest-test-$n;"
	         " openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
	         "  -out $n.pem -days 2 -extfile $n.ext; done",
	         dir);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " >'%s/openssl.log' 2>&1", dir);
	return system(cmd) == 0;
}

static inline const char *
t_etcd_bin(void)
{
	const char *b = getenv("ZEST_ETCD");

	return b && *b ? b : "/usr/bin/etcd";
}

static inline bool
t_etcd_available(void)
{
	return access(t_etcd_bin(), X_OK) == 0;
}

/* Exit 77 (the test skips) when there is no etcd to start. */
static inline void
t_etcd_require(void)
{
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		exit(77);
	}
}

/* Free loopback ports, all held open together so they differ, then released. */
static inline void
t_free_ports(int *ports, unsigned n)
{
	int fd[2 * T_ETCD_MAX];

	CHECK(n <= 2 * T_ETCD_MAX);
	for (unsigned i = 0; i < n; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t len = sizeof(a);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd[i] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fd[i] >= 0);
		CHECK(bind(fd[i], (struct sockaddr *)&a, sizeof(a)) == 0);
		CHECK(getsockname(fd[i], (struct sockaddr *)&a, &len) == 0);
		ports[i] = ntohs(a.sin_port);
	}
	for (unsigned i = 0; i < n; i++)
		close(fd[i]);
}

static inline int t_etcd_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw);

/* Remove the data dirs of tests that died without t_etcd_stop (a failed CHECK aborts): each
 * dir's name carries its test's pid, and a pid that no longer exists owns nothing. */
static inline void
t_etcd_sweep(const char *base)
{
	char path[PATH_MAX];
	struct dirent *d;
	DIR *dir = opendir(base);
	int pid;

	if (!dir)
		return;
	while ((d = readdir(dir)))
		if (sscanf(d->d_name, "zest-etcd-%d-", &pid) == 1 && pid > 0 && kill(pid, 0) < 0 &&
		    errno == ESRCH) {
			snprintf(path, sizeof(path), "%s/%s", base, d->d_name);
			nftw(path, t_etcd_rm, 16, FTW_DEPTH | FTW_PHYS);
		}
	closedir(dir);
}

static inline void
t_etcd_start_tls(struct t_etcd *e, unsigned n, const char *tls_dir)
{
	const char *scheme = tls_dir ? "https" : "http";
	char cluster[512] = "", token[64], ca[PATH_MAX + 16], cert[PATH_MAX + 16],
	     key[PATH_MAX + 16];
	int ports[2 * T_ETCD_MAX];
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	CHECK(n >= 1 && n <= T_ETCD_MAX);
	memset(e, 0, sizeof(*e));
	e->n = n;
	t_etcd_sweep(base);
	snprintf(e->root, sizeof(e->root), "%s/zest-etcd-%d-XXXXXX", base, (int)getpid());
	CHECK(mkdtemp(e->root));
	t_free_ports(ports, 2 * n);
	for (unsigned i = 0; i < n; i++) {
		size_t l = strlen(cluster);

		e->client_port[i] = ports[2 * i];
		e->peer_port[i] = ports[2 * i + 1];
		snprintf(cluster + l, sizeof(cluster) - l, "%sn%u=http://127.0.0.1:%d",
		         i ? "," : "", i, e->peer_port[i]);
		l = strlen(e->endpoints);
		snprintf(e->endpoints + l, sizeof(e->endpoints) - l, "%s127.0.0.1:%d", i ? "," : "",
		         e->client_port[i]);
	}
	snprintf(token, sizeof(token), "zest-test-%d", (int)getpid());
	snprintf(ca, sizeof(ca), "%s/ca.pem", tls_dir ? tls_dir : "");
	snprintf(cert, sizeof(cert), "%s/server.pem", tls_dir ? tls_dir : "");
	snprintf(key, sizeof(key), "%s/server.key", tls_dir ? tls_dir : "");
	for (unsigned i = 0; i < n; i++) {
		char name[16], dir[PATH_MAX + 32], log[PATH_MAX + 48], curl[64], purl[64];
		pid_t pid;

		snprintf(name, sizeof(name), "n%u", i);
		snprintf(dir, sizeof(dir), "%s/%s", e->root, name);
		snprintf(log, sizeof(log), "%s/%s.log", e->root, name);
		snprintf(curl, sizeof(curl), "%s://127.0.0.1:%d", scheme, e->client_port[i]);
		snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", e->peer_port[i]);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
			}
			const char *argv[] = { "etcd",
				               "--name",
				               name,
				               "--data-dir",
				               dir,
				               "--listen-client-urls",
				               curl,
				               "--advertise-client-urls",
				               curl,
				               "--listen-peer-urls",
				               purl,
				               "--initial-advertise-peer-urls",
				               purl,
				               "--initial-cluster",
				               cluster,
				               "--initial-cluster-state",
				               "new",
				               "--initial-cluster-token",
				               token,
				               "--heartbeat-interval",
				               "50",
				               "--election-timeout",
				               "500",
				               tls_dir ? "--client-cert-auth" : NULL,
				               "--trusted-ca-file",
				               ca,
				               "--cert-file",
				               cert,
				               "--key-file",
				               key,
				               NULL };
			execv(t_etcd_bin(), (char *const *)argv);
			_exit(127);
		}
		e->pid[i] = pid;
	}
}

static inline void
t_etcd_start(struct t_etcd *e, unsigned n)
{
	t_etcd_start_tls(e, n, NULL);
}

/* SIGKILL member i (a crash, not a shutdown) and reap it. */
static inline void
t_etcd_kill(struct t_etcd *e, unsigned i)
{
	if (i >= e->n || e->pid[i] <= 0)
		return;
	kill(e->pid[i], SIGKILL);
	waitpid(e->pid[i], NULL, 0);
	e->pid[i] = 0;
}

static inline int
t_etcd_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline void
t_etcd_stop(struct t_etcd *e)
{
	for (unsigned i = 0; i < e->n; i++)
		t_etcd_kill(e, i);
	if (e->root[0])
		nftw(e->root, t_etcd_rm, 16, FTW_DEPTH | FTW_PHYS);
	e->root[0] = '\0';
}

#endif
