/*
 * test_acl.c: unit tests for src/config/acl.c: the acl_file grammar (comments, blank lines, the
 * anonymous section, optional access word, errors with their line), and the compiled check:
 * user and anonymous sections, deny winning, %c/%u patterns (%u never for anonymous clients,
 * wildcards in substituted values), $SYS and no-match-means-denied.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "acl.h"

static struct acl_rules *parse_ok(const char *text)
{
    struct acl_rules *rules = NULL;
    int line = -1;
    char err[256] = "";
    int rc = acl_rules_parse(text, strlen(text), &rules, &line, err, sizeof err);
    if (rc != 0) fail_msg("parse failed at line %d: %s", line, err);
    assert_non_null(rules);
    return rules;
}

static void expect_parse_error(const char *text, int want_line, const char *want_text)
{
    struct acl_rules *rules = NULL;
    int line = -1;
    char err[256] = "";
    assert_int_equal(acl_rules_parse(text, strlen(text), &rules, &line, err, sizeof err), -1);
    assert_null(rules);
    assert_int_equal(line, want_line);
    if (!strstr(err, want_text)) fail_msg("error \"%s\" lacks \"%s\"", err, want_text);
}

static bool allows(const struct acl_client *acl, const char *topic, unsigned access)
{
    return acl_client_allows(acl, topic, strlen(topic), access);
}

static const char *const sample =
    "# comment\n"
    "\n"
    "topic read $SYS/broker/uptime\n"
    "  topic readwrite anon/#  \r\n"
    "user alice\n"
    "topic readwrite alice/#\n"
    "topic read ro/#\n"
    "topic write wo/#\n"
    "topic deny alice/secret\n"
    "topic shared/+/x\n"
    "pattern readwrite clients/%c/#\n"
    "pattern read users/%u/#\n"
    "user bob smith\n"
    "topic read b\n";

static void test_user_section(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok(sample);
    struct acl_client *acl = acl_client_compile(rules, "c1", "alice");
    assert_non_null(acl);
    assert_true(allows(acl, "alice/x", ACL_READ));
    assert_true(allows(acl, "alice/x", ACL_WRITE));
    assert_true(allows(acl, "ro/a/b", ACL_READ));
    assert_false(allows(acl, "ro/a/b", ACL_WRITE));
    assert_true(allows(acl, "wo/a", ACL_WRITE));
    assert_false(allows(acl, "wo/a", ACL_READ));
    assert_false(allows(acl, "alice/secret", ACL_READ)); /* deny wins over alice/# */
    assert_false(allows(acl, "alice/secret", ACL_WRITE));
    assert_true(allows(acl, "shared/q/x", ACL_WRITE)); /* no access word: readwrite */
    assert_false(allows(acl, "anon/x", ACL_READ));     /* the anonymous section is not hers */
    assert_false(allows(acl, "other", ACL_READ));      /* no match: denied */
    assert_false(allows(acl, "$SYS/broker/uptime", ACL_READ));
    assert_true(allows(acl, "clients/c1/a", ACL_WRITE));
    assert_false(allows(acl, "clients/c2/a", ACL_WRITE));
    assert_true(allows(acl, "users/alice/a", ACL_READ));
    assert_false(allows(acl, "users/alice/a", ACL_WRITE));
    assert_string_equal(acl_client_username(acl), "alice");
    acl_client_free(acl);
    acl = acl_client_compile(rules, "c2", "bob smith"); /* the rest of the line is the name */
    assert_true(allows(acl, "b", ACL_READ));
    acl_client_free(acl);
    acl_rules_free(rules);
}

static void test_anonymous_and_unknown_users(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok(sample);
    struct acl_client *anon = acl_client_compile(rules, "n1", NULL);
    assert_true(allows(anon, "anon/x", ACL_WRITE));
    assert_true(allows(anon, "$SYS/broker/uptime", ACL_READ));
    assert_false(allows(anon, "$SYS/broker/load", ACL_READ));
    assert_true(allows(anon, "clients/n1/z", ACL_READ)); /* %c applies to anonymous clients */
    assert_false(allows(anon, "users//a", ACL_READ));     /* %u does not */
    assert_null(acl_client_username(anon));
    acl_client_free(anon);
    struct acl_client *carol = acl_client_compile(rules, "c3", "carol"); /* named nowhere */
    assert_false(allows(carol, "anon/x", ACL_READ));
    assert_true(allows(carol, "users/carol/1", ACL_READ));
    acl_client_free(carol);
    acl_rules_free(rules);
}

static void test_wildcards_and_sys(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok("topic read #\ntopic deny +/private\n");
    struct acl_client *acl = acl_client_compile(rules, "c", NULL);
    assert_true(allows(acl, "a/b/c", ACL_READ));
    assert_false(allows(acl, "$SYS/broker/uptime", ACL_READ)); /* '#' does not reach $SYS */
    assert_false(allows(acl, "x/private", ACL_READ));
    assert_false(allows(acl, "a", ACL_WRITE));
    acl_client_free(acl);
    acl_rules_free(rules);
}

static void test_wildcard_in_substitution(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok("pattern readwrite c/%c/#\npattern u/%u\n");
    struct acl_client *acl = acl_client_compile(rules, "+", "#"); /* would widen: skipped */
    assert_false(allows(acl, "c/x/y", ACL_READ));
    assert_false(allows(acl, "u/x", ACL_READ));
    acl_client_free(acl);
    acl = acl_client_compile(rules, "a/b", "u1"); /* '/' adds a level */
    assert_true(allows(acl, "c/a/b/z", ACL_READ));
    assert_true(allows(acl, "u/u1", ACL_WRITE));
    acl_client_free(acl);
    acl_rules_free(rules);
}

static void test_empty_file_denies_everything(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok("# nothing\n");
    struct acl_client *acl = acl_client_compile(rules, "c", "u");
    assert_false(allows(acl, "a", ACL_READ));
    assert_false(allows(acl, "a", ACL_WRITE));
    acl_client_free(acl);
    acl_rules_free(rules);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("user a\ntopic readx foo\n", 2, "invalid topic access type \"readx\"");
    expect_parse_error("# c\nfoo bar\n", 2, "invalid line \"foo\"");
    expect_parse_error("topic\n", 1, "empty topic");
    expect_parse_error("\n\nuser   \n", 3, "missing username");
    expect_parse_error("topic read a/#/b\n", 1, "invalid topic filter");
    struct acl_rules *rules = parse_ok("topic read\n"); /* one word: the topic "read" */
    struct acl_client *acl = acl_client_compile(rules, "c", NULL);
    assert_true(allows(acl, "read", ACL_WRITE));
    acl_client_free(acl);
    acl_rules_free(rules);
}

/* The fan-out check gives the same answers as acl_client_allows, with one cache shared by
 * the recipients of a message: several users, anonymous clients, own patterns that grant or
 * deny what the shared part says. */
static void test_read_cache_agrees(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok(sample);
    const char *ids[] = {"c1", "c2", "n1", "x"};
    const char *users[] = {"alice", "bob smith", NULL, "carol"};
    const char *topics[] = {"alice/x", "alice/secret", "anon/x", "clients/c1/a", "clients/n1/a",
                            "users/carol/q", "ro/1", "$SYS/broker/uptime", "b"};
    struct acl_client *acl[4];
    for (int i = 0; i < 4; i++)
        acl[i] = acl_client_compile(rules, ids[i], users[i]);
    for (size_t t = 0; t < sizeof topics / sizeof *topics; t++) {
        struct acl_read_cache cache = {0};
        for (int round = 0; round < 2; round++)
            for (int i = 0; i < 4; i++)
                assert_int_equal(acl_client_may_read(acl[i], topics[t], strlen(topics[t]), &cache),
                                 allows(acl[i], topics[t], ACL_READ));
    }
    for (int i = 0; i < 4; i++)
        acl_client_free(acl[i]);
    acl_rules_free(rules);
}

static void test_client_outlives_rules(void **state)
{
    (void)state;
    struct acl_rules *rules = parse_ok("user u\ntopic read a/#\npattern deny a/%c\n");
    struct acl_client *acl = acl_client_compile(rules, "me", "u");
    acl_rules_free(rules); /* a reload: the session keeps its list until compiled again */
    assert_true(allows(acl, "a/b", ACL_READ));
    assert_false(allows(acl, "a/me", ACL_READ));
    struct acl_read_cache cache = {0};
    assert_false(acl_client_may_read(acl, "a/me", 4, &cache));
    acl_client_free(acl);
}

static void test_load_missing_file(void **state)
{
    (void)state;
    struct acl_rules *rules = NULL;
    int line = -1;
    char err[256] = "";
    assert_int_equal(acl_rules_load("/nonexistent/acl", &rules, &line, err, sizeof err), -1);
    assert_int_equal(line, 0);
    assert_non_null(strstr(err, "unable to open"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_section),
        cmocka_unit_test(test_anonymous_and_unknown_users),
        cmocka_unit_test(test_wildcards_and_sys),
        cmocka_unit_test(test_wildcard_in_substitution),
        cmocka_unit_test(test_empty_file_denies_everything),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_read_cache_agrees),
        cmocka_unit_test(test_client_outlives_rules),
        cmocka_unit_test(test_load_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
