/* Directives from the environment (proxy/config_env.c): VERBPROXY_<DIRECTIVE>
 * names, multi-line values of the repeatable directives, typos refused with
 * the variable's name, secrets wiped where they were read. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/config_env.h"

/* The environment as the kernel hands it over: writable "NAME=value"
 * strings (conf_apply_env wipes secrets in place). */
typedef struct test_env {
    char *vars[16];
    int n;
} test_env;

static char **env_of(test_env *e, const char *const *vars)
{
    e->n = 0;
    for (; *vars; vars++)
        e->vars[e->n++] = strdup(*vars);
    e->vars[e->n] = NULL;
    return e->vars;
}

static void env_free(test_env *e)
{
    for (int i = 0; i < e->n; i++)
        free(e->vars[i]);
}

static int apply(vp_config *c, test_env *e, const char *const *vars, char *err, size_t errlen)
{
    conf_defaults(c);
    return conf_apply_env(c, env_of(e, vars), err, errlen);
}

Test(config_env, directives_by_their_upper_case_names)
{
    vp_config c;
    test_env e;
    char err[512] = "";
    static const char *const vars[] = {"HOME=/root",
                                       "VERBPROXY_UPSTREAM=redis.example:6390",
                                       "VERBPROXY_UPSTREAM_TLS=yes",
                                       "VERBPROXY_PORT=7001",
                                       "VERBPROXY_BIND=0.0.0.0",
                                       "VERBPROXY_BUFFER_LIMIT=2mb",
                                       "VERBPROXY_SHUTDOWN_MIN_DRAIN=5",
                                       "verbproxy_port=1", /* another prefix: not ours */
                                       "VERBPROXY_upstream_user=app",
                                       "VERBPROXY_UPSTREAM_PASS=taken-by-conf_finish",
                                       NULL};
    cr_assert_eq(apply(&c, &e, vars, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(c.upstream_host, "redis.example");
    cr_assert_eq(c.upstream_port, 6390);
    cr_assert_eq(c.upstream_tls, 1);
    cr_assert_eq(c.port, 7001);
    cr_assert_str_eq(c.bind, "0.0.0.0");
    cr_assert_eq(c.buffer_limit, 2 * 1024 * 1024);
    cr_assert_eq(c.shutdown_min_drain, 5);
    cr_assert_str_eq(c.upstream_user, "app");
    /* VERBPROXY_UPSTREAM_PASS is left to conf_finish (its own order). */
    cr_assert_str_eq(c.upstream_pass, "");
    cr_assert_str_eq(e.vars[9], "VERBPROXY_UPSTREAM_PASS=taken-by-conf_finish");
    env_free(&e);
    conf_free(&c);
}

Test(config_env, the_environment_overrides_the_file_like_a_later_line)
{
    vp_config c;
    test_env e;
    char err[512] = "";
    conf_defaults(&c);
    cr_assert_eq(conf_set(&c, "port", "7000", err, sizeof(err)), 0);
    cr_assert_eq(conf_set(&c, "loglevel", "warning", err, sizeof(err)), 0);
    static const char *const vars[] = {"VERBPROXY_PORT=7002", NULL};
    cr_assert_eq(conf_apply_env(&c, env_of(&e, vars), err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.port, 7002);
    cr_assert_eq(c.loglevel, VP_LOG_WARNING, "what the environment does not name stays the file's");
    env_free(&e);
    conf_free(&c);
}

Test(config_env, a_typo_is_refused_naming_the_variable)
{
    vp_config c;
    test_env e;
    char err[512] = "";
    static const char *const typo[] = {"VERBPROXY_UPSTREAM_TSL=yes", NULL};
    cr_assert_eq(apply(&c, &e, typo, err, sizeof(err)), -1);
    cr_assert(strstr(err, "VERBPROXY_UPSTREAM_TSL: unknown directive 'upstream-tsl'"), "%s", err);
    env_free(&e);
    conf_free(&c);

    static const char *const bare[] = {"VERBPROXY_=1", NULL};
    cr_assert_eq(apply(&c, &e, bare, err, sizeof(err)), -1);
    cr_assert(strstr(err, "VERBPROXY_: unknown directive"), "%s", err);
    env_free(&e);
    conf_free(&c);

    /* A name longer than any directive: still "unknown", not truncated into one. */
    static const char *const longname[] = {
        "VERBPROXY_PORTPORTPORTPORTPORTPORTPORTPORTPORTPORTPORTPORTPORTPORTPORTPORT=1", NULL};
    cr_assert_eq(apply(&c, &e, longname, err, sizeof(err)), -1);
    cr_assert(strstr(err, "unknown directive"), "%s", err);
    env_free(&e);
    conf_free(&c);
}

Test(config_env, a_bad_value_names_the_variable_and_the_reason)
{
    vp_config c;
    test_env e;
    char err[512] = "";
    static const char *const vars[] = {"VERBPROXY_PORT=99999", NULL};
    cr_assert_eq(apply(&c, &e, vars, err, sizeof(err)), -1);
    cr_assert(strstr(err, "VERBPROXY_PORT: 'port' must be an integer between 0 and 65535, got '99999'"), "%s",
              err);
    env_free(&e);
    conf_free(&c);

    static const char *const two[] = {"VERBPROXY_PORT=7000\n7001", NULL};
    cr_assert_eq(apply(&c, &e, two, err, sizeof(err)), -1);
    cr_assert(strstr(err, "VERBPROXY_PORT: 'port' takes one value, got several lines"), "%s", err);
    env_free(&e);
    conf_free(&c);
}

Test(config_env, repeatable_directives_take_one_per_line)
{
    vp_config c;
    test_env e;
    char err[512] = "";
    char verbs[1024];
    snprintf(verbs, sizeof(verbs),
             "VERBPROXY_VERB=MYINCR %s/tests/unit/../../lua/ztick.lua numkeys 1\r\n"
             "\n"
             "  MYOTHER %s/lua/zpage.lua numkeys 1 readonly\n",
             SOURCE_DIR, SOURCE_DIR);
    const char *const vars[] = {verbs, NULL};
    cr_assert_eq(apply(&c, &e, vars, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.ncustom_verbs, 2);
    env_free(&e);
    conf_free(&c);

    /* The second line is wrong: its reason, with the variable's name. */
    snprintf(verbs, sizeof(verbs),
             "VERBPROXY_VERB=MYINCR %s/lua/ztick.lua numkeys 1\nMYINCR %s/lua/ztick.lua numkeys 1",
             SOURCE_DIR, SOURCE_DIR);
    cr_assert_eq(apply(&c, &e, vars, err, sizeof(err)), -1);
    cr_assert(strstr(err, "VERBPROXY_VERB: verb 'myincr' is defined twice"), "%s", err);
    env_free(&e);
    conf_free(&c);
}

/* Every byte after '=' is zero. */
static void assert_wiped(const char *var)
{
    const char *eq = strchr(var, '=');
    cr_assert(eq != NULL);
    cr_assert_eq(eq[1], '\0', "%s still holds its value", var);
}

Test(config_env, secrets_are_wiped_where_they_were_read_taken_or_not)
{
    vp_config c;
    test_env e;
    char err[512] = "";
    static const char *const vars[] = {
        "VERBPROXY_REQUIREPASS=proxy-secret",
        "VERBPROXY_USER=alice on >alice-secret ~* +@all\nbob on >bob-secret ~* +@all",
        "VERBPROXY_TLS_KEY_FILE_PASS=key-secret", "VERBPROXY_PORT=7003", NULL};
    char *saved[5];
    char **env = env_of(&e, vars);
    for (int i = 0; i < 4; i++)
        saved[i] = env[i];
    conf_defaults(&c);
    cr_assert_eq(conf_apply_env(&c, env, err, sizeof(err)), 0, "%s", err);
    for (int i = 0; i < 3; i++)
        assert_wiped(saved[i]);
    cr_assert_str_eq(saved[3], "VERBPROXY_PORT=7003", "not a secret: left alone");
    cr_assert_str_eq(c.tls.key_file_pass, "key-secret");
    env_free(&e);
    conf_free(&c);

    /* A refused environment still wipes the secrets after the error. */
    static const char *const bad[] = {"VERBPROXY_PROT=1", "VERBPROXY_REQUIREPASS=later-secret", NULL};
    env = env_of(&e, bad);
    char *pass = env[1];
    conf_defaults(&c);
    cr_assert_eq(conf_apply_env(&c, env, err, sizeof(err)), -1);
    assert_wiped(pass);
    env_free(&e);
    conf_free(&c);
}

Test(config_env, unset_removes_the_secrets_but_leaves_the_upstream_password_to_conf_finish)
{
    setenv("VERBPROXY_REQUIREPASS", "gone", 1);
    setenv("VERBPROXY_TLS_KEY_FILE_PASS", "gone-too", 1);
    setenv("VERBPROXY_UPSTREAM_PASS", "read-later", 1);
    setenv("VERBPROXY_PORT", "7004", 1);
    conf_env_unset_secrets();
    cr_assert_null(getenv("VERBPROXY_REQUIREPASS"));
    cr_assert_null(getenv("VERBPROXY_TLS_KEY_FILE_PASS"));
    /* main.c reads it after (conf_finish) and wipes it then. */
    cr_assert_str_eq(getenv("VERBPROXY_UPSTREAM_PASS"), "read-later");
    cr_assert_str_eq(getenv("VERBPROXY_PORT"), "7004");
}
