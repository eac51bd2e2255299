/* Flag parsing: defaults, every flag, --help/--version, and precise refusals. */
#include "dn_test.h"
#include "dn_daemon.h"

static char errbuf[512]; /* the last parse's message */

static int
parse(struct dn_config *c, const char *line)
{
	char buf[1024], *argv[64];
	int argc = 0;
	FILE *null = fopen("/dev/null", "w"), *e;
	int err;

	snprintf(buf, sizeof(buf), "zest-datanode %s", line);
	for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;
	memset(errbuf, 0, sizeof(errbuf));
	e = fmemopen(errbuf, sizeof(errbuf) - 1, "w");
	err = dn_config_parse(c, argc, argv, null, e);
	fclose(e);
	fclose(null);
	return err;
}

int
main(void)
{
	struct dn_config c;
	struct dn_store_opts o;
	const char *six = "--drive a --drive b --drive c --drive d --drive e --drive f --insecure";
	const char *six_bare = "--drive a --drive b --drive c --drive d --drive e --drive f";
	char line[512];

	CHECK_EQ(parse(&c, six), 0);
	CHECK_EQ(c.k, 4);
	CHECK_EQ(c.m, 2);
	CHECK_EQ(c.cell_size, 1 << 20);
	CHECK(c.zerocopy && !c.discard && !c.heal && !c.metrics);
	CHECK_EQ(c.ndrives, 6);
	CHECK_EQ(c.write_workers, 4);
	CHECK_EQ(c.readers, 4);
	CHECK_EQ(c.call_cap, 8 << 20);
	CHECK_EQ(c.grace_ns, 5000000000ull);
	snprintf(line, sizeof(line),
	         "%s --write-workers 2 --readers 16 --call-queue-cap 1MiB --shutdown-grace 250ms",
	         six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.write_workers, 2);
	CHECK_EQ(c.readers, 16);
	CHECK_EQ(c.call_cap, 1 << 20);
	CHECK_EQ(c.grace_ns, 250000000);
	snprintf(line, sizeof(line), "%s --shutdown-grace 0", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.grace_ns, 0);
	/* cluster mode: --cluster and --node together, --advertise only with them */
	CHECK(!c.cluster && !c.node && !c.advertise);
	snprintf(line, sizeof(line), "%s --cluster 127.0.0.1:2379 --node dn-1", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(strcmp(c.cluster, "127.0.0.1:2379") == 0 && strcmp(c.node, "dn-1") == 0);
	CHECK_EQ(c.gc_grace_ns, 600000000000ull);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --gc-grace 30s", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.gc_grace_ns, 30000000000ull);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --gc-grace 100ms", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	CHECK_EQ(c.read_grace_ns, 0); /* the collector uses --gc-grace */
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --read-grace 2m", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.read_grace_ns, 120000000000ull);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --read-grace 10ms", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	CHECK_EQ(c.heal_after_ns, 600000000000ull);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --heal-after 3s", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.heal_after_ns, 3000000000ull);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --heal-after 10ms", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --heal-after soon", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cluster 127.0.0.1:2379", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --node dn-1", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --advertise 10.0.0.1:7070", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	/* --zone with --cluster only (its rule is dn_cluster_start's); --reserve a size */
	CHECK(!c.zone);
	CHECK_EQ(c.reserve, 1ull << 30);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --zone rack-2 --reserve 5GiB", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(strcmp(c.zone, "rack-2") == 0 && c.reserve == 5ull << 30);
	snprintf(line, sizeof(line), "%s --zone rack-2", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cluster e:1 --node n --reserve much", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --write-workers 0", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --readers 257", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --call-queue-cap 4KiB", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --call-queue-cap lots", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --shutdown-grace 11m", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --shutdown-grace soon", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line),
	         "%s --listen 0.0.0.0:9 --ec 3+2 --cell-size 256KiB --marshaller copy --discard "
	         "--metrics 127.0.0.1:9100 --write-quorum 4 --stripes-per-group 8 "
	         "--inflight-cap 64MiB --admission-l1 5ms --admission-l2 10ms --admission-l3 2s",
	         six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.k, 3);
	CHECK_EQ(c.m, 2);
	CHECK_EQ(c.cell_size, 256 << 10);
	CHECK(!c.zerocopy && c.discard);
	CHECK(strcmp(c.listen, "0.0.0.0:9") == 0 && strcmp(c.metrics, "127.0.0.1:9100") == 0);
	CHECK_EQ(c.write_quorum, 4);
	CHECK_EQ(c.stripes_per_group, 8);
	CHECK_EQ(c.inflight_cap, 64 << 20);
	CHECK_EQ(c.adm_l1_ns, 5000000);
	CHECK_EQ(c.adm_l3_ns, 2000000000);
	dn_config_to_opts(&c, &o);
	CHECK_EQ(o.k, 3);
	CHECK_EQ(o.ndrives, 6);
	CHECK(o.discard);
	snprintf(line, sizeof(line), "heal %s", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(c.heal);
	CHECK_EQ(c.heal_drive, -1);
	snprintf(line, sizeof(line), "heal %s --heal-drive 5", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.heal_drive, 5);
	snprintf(line, sizeof(line), "heal %s --heal-drive 6", six); /* no drive 6 */
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --heal-drive 1", six); /* not healing */
	CHECK_EQ(parse(&c, line), -EINVAL);
	/* gRPC security: mutual TLS (all three files) or --insecure, never neither */
	CHECK(c.tls.insecure && !c.tls.ca_file);
	CHECK_EQ(parse(&c, six_bare), -EINVAL);
	snprintf(line, sizeof(line), "%s --tls-ca ca.pem --tls-cert dn.pem --tls-key dn.key",
	         six_bare);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(!c.tls.insecure && strcmp(c.tls.ca_file, "ca.pem") == 0 &&
	      strcmp(c.tls.cert_file, "dn.pem") == 0 && strcmp(c.tls.key_file, "dn.key") == 0);
	snprintf(line, sizeof(line), "%s --tls-ca ca.pem --tls-cert dn.pem", six_bare);
	CHECK_EQ(parse(&c, line), -EINVAL); /* no key */
	snprintf(line, sizeof(line), "%s --tls-key dn.key", six_bare);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --tls-ca ca.pem --tls-cert dn.pem --tls-key dn.key", six);
	CHECK_EQ(parse(&c, line), -EINVAL); /* --insecure and TLS */
	/* the local link is an extra listener: the TCP port still needs its security */
	CHECK(!c.unix_socket);
	snprintf(line, sizeof(line), "%s --unix-socket /run/zest/dn.sock", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(strcmp(c.unix_socket, "/run/zest/dn.sock") == 0);
	snprintf(line, sizeof(line), "%s --unix-socket /run/zest/dn.sock", six_bare);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "heal %s", six_bare);
	CHECK_EQ(parse(&c, line), 0); /* heal serves nothing */
	CHECK_EQ(parse(&c, "--help"), 1);
	CHECK_EQ(parse(&c, "--version"), 1);
	CHECK_EQ(parse(&c, "--drive a"), -EINVAL); /* fewer than k + m */
	/* cluster mode: one drive will do (cells go to the cell store) */
	CHECK_EQ(parse(&c, "--drive a --insecure --cluster e:1 --node n"), 0);
	dn_config_to_opts(&c, &o);
	CHECK(o.cells_only && o.ndrives == 1 && o.k == 4 && o.m == 2);
	CHECK_EQ(parse(&c, "--insecure --cluster e:1 --node n"), -EINVAL); /* none */
	/* plaintext etcd only with --insecure: with the --tls-* files every endpoint is https */
	const char *tls = "--drive a --tls-ca ca --tls-cert crt --tls-key key --node n";
	snprintf(line, sizeof(line), "%s --cluster e:1", tls);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cluster http://e:1", tls);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cluster https://e:1,e:2", tls);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cluster https://e:1,https://e:2", tls);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(parse(&c, "--drive a --insecure --cluster http://e:1 --node n"), 0);
	snprintf(line, sizeof(line), "%s --ec 4", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --ec 30+3", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --cell-size 1000", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --marshaller fast", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	/* --data-io: direct (the default) or buffered, nothing else */
	CHECK_EQ(parse(&c, six), 0);
	dn_config_to_opts(&c, &o);
	CHECK(c.data_direct && o.data_direct);
	snprintf(line, sizeof(line), "%s --data-io buffered", six);
	CHECK_EQ(parse(&c, line), 0);
	dn_config_to_opts(&c, &o);
	CHECK(!c.data_direct && !o.data_direct);
	snprintf(line, sizeof(line), "%s --data-io buffered --data-io direct", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(c.data_direct);
	snprintf(line, sizeof(line), "%s --data-io odirect", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	CHECK(strstr(errbuf, "bad value for --data-io: odirect") != NULL);
	/* the scrubber: MiB/s or a size per second, days; 0 turns it off */
	CHECK_EQ(parse(&c, six), 0);
	CHECK_EQ(c.scrub_rate, 16 << 20);
	CHECK_EQ(c.scrub_every_ns, 7 * 86400000000000ull);
	snprintf(line, sizeof(line), "%s --scrub-rate 2.5 --scrub-interval 36h", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.scrub_rate, 5 << 19);
	CHECK_EQ(c.scrub_every_ns, 36 * 3600000000000ull);
	snprintf(line, sizeof(line), "%s --scrub-rate 512KiB/s --scrub-interval 14d", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK_EQ(c.scrub_rate, 512 << 10);
	CHECK_EQ(c.scrub_every_ns, 14 * 86400000000000ull);
	snprintf(line, sizeof(line), "%s --scrub-rate 0 --scrub-interval 0", six);
	CHECK_EQ(parse(&c, line), 0);
	CHECK(!c.scrub_rate && !c.scrub_every_ns);
	snprintf(line, sizeof(line), "%s --scrub-rate 100B", six); /* below 4 KiB/s */
	CHECK_EQ(parse(&c, line), -EINVAL);
	CHECK(strstr(errbuf, "bad value for --scrub-rate: 100B") != NULL);
	snprintf(line, sizeof(line), "%s --scrub-rate fast", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --scrub-interval 31d", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	CHECK(strstr(errbuf, "bad value for --scrub-interval: 31d") != NULL);
	snprintf(line, sizeof(line), "%s --scrub-interval 500ms", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --write-quorum 7", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --admission-l1 2s --admission-l2 1s", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s --bogus", six);
	CHECK_EQ(parse(&c, line), -EINVAL);
	snprintf(line, sizeof(line), "%s extra", six);
	CHECK_EQ(parse(&c, line), -EINVAL);

	/* --config: defaults, then the file, then flags; a bad line says FILE:LINE */
	{
		char path[] = "/tmp/test_dn_config.XXXXXX", want[128];
		const char *good = "# six drives\n"
		                   "drive = a\ndrive = b\ndrive = c\ndrive = d\ndrive = e\n"
		                   "drive = f\ninsecure = true\ncell-size = 64KiB\n"
		                   "listen = 1.2.3.4:1\n";
		int fd = mkstemp(path);
		FILE *f;

		CHECK(fd >= 0);
		close(fd);
		f = fopen(path, "w");
		fputs(good, f);
		fclose(f);
		snprintf(line, sizeof(line), "--config %s --listen 5.6.7.8:2 --readers 2", path);
		CHECK_EQ(parse(&c, line), 0);
		CHECK_EQ(c.ndrives, 6);
		CHECK(!strcmp(c.drives[0], "a") && !strcmp(c.drives[5], "f"));
		CHECK_EQ(c.cell_size, 65536);
		CHECK(c.tls.insecure);
		CHECK(!strcmp(c.listen, "5.6.7.8:2")); /* the flag wins */
		CHECK_EQ(c.readers, 2);
		snprintf(line, sizeof(line), "heal --config=%s --heal-drive 5", path);
		CHECK_EQ(parse(&c, line), 0);
		CHECK(c.heal && c.ndrives == 6 && c.heal_drive == 5);
		CHECK(!strcmp(c.listen, "1.2.3.4:1"));
		/* a bad value on line 3, with and without the subcommand in front */
		f = fopen(path, "w");
		fputs("insecure = true\n\ncell-size = 100KiB\n", f);
		fclose(f);
		snprintf(want, sizeof(want), "zest-datanode: %s:3: bad value for cell-size: 100KiB\n",
		         path);
		snprintf(line, sizeof(line), "%s --config %s", six_bare, path);
		CHECK_EQ(parse(&c, line), -EINVAL);
		CHECK(!strncmp(errbuf, want, strlen(want)));
		CHECK(strstr(errbuf, "  --cell-size SIZE ") != NULL); /* its --help line */
		snprintf(line, sizeof(line), "heal --config %s %s", path, six_bare);
		CHECK_EQ(parse(&c, line), -EINVAL);
		CHECK(!strncmp(errbuf, want, strlen(want)));
		/* the same value as a flag: no file line */
		snprintf(line, sizeof(line), "%s --cell-size 100KiB", six);
		CHECK_EQ(parse(&c, line), -EINVAL);
		CHECK(!strncmp(errbuf, "zest-datanode: bad value for --cell-size: 100KiB", 48));
		f = fopen(path, "w");
		fputs("insecure = true\nwrite-quorom = 5\n", f);
		fclose(f);
		snprintf(line, sizeof(line), "%s --config %s", six_bare, path);
		CHECK_EQ(parse(&c, line), -EINVAL);
		snprintf(want, sizeof(want), "zest-datanode: %s:2: unknown setting 'write-quorom'",
		         path);
		CHECK(!strncmp(errbuf, want, strlen(want)));
		unlink(path);
	}
	printf("ok\n");
	return 0;
}
