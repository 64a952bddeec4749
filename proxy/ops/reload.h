/* reload.h - where the settings come from, and SIGHUP's reload of them.
 *
 * The settings are built the same way at start and at every reload, from
 * a vp_conf_source: the defaults, then the --config file, then the
 * VERBPROXY_* environment variables (config_env.h), then the command-line
 * flags in order (so flags override both), then the environment's upstream
 * password (conf_finish's own rule). Start-up keeps copies of the
 * variables, the flags and that password (the secrets are wiped from what
 * `ps` and /proc show), so a reload sees what start-up saw.
 *
 * A reload parses into a fresh vp_config and builds everything that can
 * fail (the verb table: scripts read; the TLS contexts: certificates and
 * keys read) before touching anything: a bad file, script or certificate
 * changes nothing, is logged with its reason (`file:line: reason` for the
 * file) and counted (stats reload_failures). What cannot change without a
 * restart (the listeners, shared-upstreams, upstream-tls on or off) is
 * logged "needs a restart" and left as it was; everything else takes
 * effect without dropping a connection (docs/operations.md#reload). */
#ifndef VP_RELOAD_H
#define VP_RELOAD_H

#include <stddef.h>

#include "proxy/config.h"
#include "proxy/server.h"

typedef struct vp_conf_source {
    char *config_path; /* --config, or NULL */
    char **flags;      /* name, value, name, value... (copies; secrets too, never logged) */
    int nflags;        /* pairs */
    char **env;        /* VERBPROXY_* variables as found at start ("NAME=value" copies, NULL-terminated) */
    char *env_pass;    /* $VERBPROXY_UPSTREAM_PASS as found at start, or NULL */
} vp_conf_source;

/* From the command line (after --help, --version and --script are
 * handled): --config FILE and --NAME VALUE pairs. Returns 0, or -1 with
 * the reason in err (a lone argument). Takes the VERBPROXY_* variables and
 * the environment's password, and wipes the secrets from the environment. */
int reload_source_init(vp_conf_source *src, int argc, char **argv, char *err, size_t errlen);
void reload_source_free(vp_conf_source *src);

/* Defaults, file, environment, flags, conf_finish into *out. Returns 0, or
 * -1 with the reason in err ("file:line: reason", "environment VERBPROXY_X:
 * reason", "flag --x: reason"); *out
 * is then freed. */
int reload_read_config(const vp_conf_source *src, vp_config *out, char *err, size_t errlen);

/* SIGHUP: read the settings again and apply what changed. */
void reload_apply(vp_server *srv, const vp_conf_source *src);

#endif
