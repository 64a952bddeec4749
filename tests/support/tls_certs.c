#include "tests/support/tls_certs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bumped whenever the set changes, so an old cache is not used. */
#define VT_CERTS_VERSION "v1"
/* The last file the script writes: its presence says the set is whole. */
#define VT_CERTS_LAST "named.crt"

static const char vt_certs_script[] =
    "set -e\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out \"$1\"; }\n"
    "ca() { key $1.key; openssl req -x509 -new -key $1.key -out $1.crt -days 3650 -subj \"/CN=$2\" -sha256; }\n"
    "printf '[srv]\\nsubjectAltName=IP:127.0.0.1,DNS:localhost\\n[wrong]\\nsubjectAltName=DNS:wrong.example,"
    "IP:10.9.9.9\\n[cli]\\nextendedKeyUsage=clientAuth\\n[alt]\\nsubjectAltName=DNS:redis.example\\n' > ext.cnf\n"
    "sign() {\n"
    "  key $1.key; openssl req -new -key $1.key -out $1.csr -subj \"/CN=$1\"\n"
    "  if [ -n \"$4\" ]; then\n"
    "    mkdir -p ca-$1; : > ca-$1/index.txt; echo 01 > ca-$1/serial\n"
    "    printf '[ca]\\ndefault_ca=vt\\n[vt]\\ndatabase=ca-%s/index.txt\\nnew_certs_dir=ca-%s\\nserial=ca-%s/serial"
    "\\ndefault_md=sha256\\npolicy=pol\\nunique_subject=no\\n[pol]\\ncommonName=supplied\\n' $1 $1 $1 > ca-$1.cnf\n"
    "    openssl ca -batch -config ca-$1.cnf -cert $2.crt -keyfile $2.key -in $1.csr -out $1.crt "
    "-startdate $4 -enddate $5 -extfile ext.cnf -extensions $3\n"
    "  else\n"
    "    openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -out $1.crt -days 3650 "
    "-sha256 -extfile ext.cnf -extensions $3\n"
    "  fi\n"
    "}\n"
    "ca ca vt-ca; ca other-ca vt-other-ca\n"
    "sign server ca srv; sign expired ca srv 20200101000000Z 20200102000000Z; sign unknown other-ca srv\n"
    "sign wrong-name ca wrong; sign client ca cli; sign other-client other-ca cli; sign named ca alt\n";

static int vt_certs_whole(const char *dir)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/" VT_CERTS_LAST, dir);
    return access(path, R_OK) == 0;
}

const vt_certs *vt_certs_get(void)
{
    static vt_certs certs;
    if (certs.dir[0]) return &certs;
    char dir[96];
    snprintf(dir, sizeof(dir), "/tmp/vt-certs-%u-" VT_CERTS_VERSION, (unsigned)getuid());
    if (!vt_certs_whole(dir)) {
        char tmp[] = "/tmp/vt-certs-new-XXXXXX";
        if (!mkdtemp(tmp)) {
            fprintf(stderr, "vt: mkdtemp: %s\n", strerror(errno));
            return NULL;
        }
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "cd %s && sh -s >gen.log 2>&1", tmp);
        FILE *sh = popen(cmd, "w");
        int ok = sh && fwrite(vt_certs_script, 1, sizeof(vt_certs_script) - 1, sh) == sizeof(vt_certs_script) - 1;
        int st = sh ? pclose(sh) : -1;
        if (!ok || st != 0) {
            fprintf(stderr, "vt: making certificates in %s failed (see %s/gen.log)\n", tmp, tmp);
            return NULL;
        }
        /* Another process may have won the race: then ours goes. */
        if (rename(tmp, dir) != 0) {
            snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
            if (system(cmd) != 0) fprintf(stderr, "vt: cannot remove %s\n", tmp);
            if (!vt_certs_whole(dir)) {
                fprintf(stderr, "vt: %s exists but is not a whole certificate set\n", dir);
                return NULL;
            }
        }
    }
    snprintf(certs.dir, sizeof(certs.dir), "%s", dir);
    return &certs;
}

const char *vt_cert_path(const char *file)
{
    static char paths[8][160];
    static int next;
    const vt_certs *c = vt_certs_get();
    char *p = paths[next++ % 8];
    snprintf(p, sizeof(paths[0]), "%s/%s", c ? c->dir : "/nonexistent", file);
    return p;
}
