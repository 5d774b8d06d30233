/*
 * test_password_file.c: unit tests for lib/password_hash.c and src/config/password_file.c. The
 * vectors are lines written by Debian's mosquitto_passwd 2.0.11 and hashes computed with
 * Python's hashlib (pbkdf2_hmac('sha512', ...) and sha512(password + salt)), so the
 * broker's verification is checked against two independent implementations.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "password_file.h"
#include "password_hash.h"

/* mosquitto_passwd -c -b pw alice secret; -b -I 5 pw bob pw2; -H sha512 -b pw carol pw3 */
#define MOSQ_ALICE                                                                                 \
    "alice:$7$101$rM03WmuWPHqJHY3Q$wo8V2VHCrYkyyhOKj7YRM6hvcbuXiLnM5KPzpoOw8N82kP2naYKhq7J7J3SGaE" \
    "yZhKHYnofYcriYuMX0usCe5A=="
#define MOSQ_BOB                                                                                   \
    "bob:$7$5$t4pKagubaaI20RQ0$I9DhkSfpuz2u559aNTL0VC9Ijo5abznT9ryKUaVNLGXTF4pu/G4IjcJWtL8/+tGBr" \
    "Jp4avIALBAPQebXY7kgzQ=="
#define MOSQ_CAROL                                                                                 \
    "carol:$6$K1RMvCfQuTbiR71z$cgBoF4jPWpmrX4IOckXEc7bJRnPmBoPwklPnyxvQtUsGOTo+6gT70DZotMWcJBKtM" \
    "vecxv6w8bik07sUpC3VNQ=="
/* Python: salt b'arbor-salt-1'; pbkdf2_hmac('sha512', 'päss word', salt, 1000) and
 * sha512(b'hunter2' + salt) */
#define PY_PBKDF2                                                                                  \
    "$7$1000$YXJib3Itc2FsdC0x$qd30DtQmrsTyh6hjDnJoxPEeGYGk9//lFBCEwET/L0Do3Iq5LjrN0zNkDQ2mmNUFBZZ" \
    "PkHIC3UiRAaS2cg5jLw=="
#define PY_SHA512                                                                                  \
    "$6$YXJib3Itc2FsdC0x$ipuur5xR+Ob92Y6fGkc0JNvYw+LtroVGZ2GON9b9hF9eSHmHuYIDpFFYbhcEm3rYRX6PJNjn" \
    "h20PxoyvYhDh9Q=="

static bool verifies(const char *hash_text, const char *password)
{
    struct password_hash h;
    const char *why;
    assert_int_equal(password_hash_parse(hash_text, &h, &why), 0);
    return password_hash_verify(&h, password, strlen(password));
}

static void python_vectors_verify(void **state)
{
    (void)state;
    assert_true(verifies(PY_PBKDF2, "p\xc3\xa4ss word"));
    assert_false(verifies(PY_PBKDF2, "p\xc3\xa4ss wore"));
    assert_false(verifies(PY_PBKDF2, ""));
    assert_true(verifies(PY_SHA512, "hunter2"));
    assert_false(verifies(PY_SHA512, "hunter"));
    struct password_hash h;
    const char *why;
    assert_int_equal(password_hash_parse(PY_PBKDF2, &h, &why), 0);
    assert_int_equal(h.kind, PASSWORD_HASH_PBKDF2_SHA512);
    assert_int_equal(h.iterations, 1000);
    assert_int_equal(h.salt_len, 12);
    assert_memory_equal(h.salt, "arbor-salt-1", 12);
}

static void mosquitto_file_loads_and_checks(void **state)
{
    (void)state;
    struct password_table *table;
    char err[256];
    const char *text = "# users\n" MOSQ_ALICE "\n\n" MOSQ_BOB "\r\n" MOSQ_CAROL; /* no final \n */
    assert_int_equal(password_table_parse(text, "pw", &table, err, sizeof err), 0);
    assert_int_equal(password_table_count(table), 3);
    assert_true(password_table_check(table, "alice", "secret", 6));
    assert_false(password_table_check(table, "alice", "secreT", 6));
    assert_false(password_table_check(table, "alice", "secret", 5));
    assert_false(password_table_check(table, "alice", NULL, 0));
    assert_true(password_table_check(table, "bob", "pw2", 3));
    assert_true(password_table_check(table, "carol", "pw3", 3));
    assert_false(password_table_check(table, "dave", "pw3", 3));
    assert_false(password_table_check(table, NULL, "pw3", 3));
    password_table_free(table);
}

static void created_hashes_round_trip(void **state)
{
    (void)state;
    enum password_hash_kind kinds[] = {PASSWORD_HASH_PBKDF2_SHA512, PASSWORD_HASH_SHA512};
    for (size_t i = 0; i < 2; i++) {
        struct password_hash h, again;
        char text[PASSWORD_HASH_TEXT_MAX];
        const char *why;
        assert_int_equal(password_hash_create(&h, kinds[i], "s3cret", 6, 101), 0);
        assert_int_equal(password_hash_format(&h, text, sizeof text), 0);
        const char *prefix = i == 0 ? "$7$101$" : "$6$";
        assert_int_equal(strncmp(text, prefix, strlen(prefix)), 0);
        assert_int_equal(password_hash_parse(text, &again, &why), 0);
        assert_true(password_hash_verify(&again, "s3cret", 6));
        assert_false(password_hash_verify(&again, "s3cre", 5));
        struct password_hash other;
        assert_int_equal(password_hash_create(&other, kinds[i], "s3cret", 6, 101), 0);
        assert_memory_not_equal(h.salt, other.salt, PASSWORD_SALT_BYTES); /* random salt */
    }
    struct password_hash h;
    assert_int_equal(password_hash_create(&h, PASSWORD_HASH_PBKDF2_SHA512, "x", 1, 0), -1);
}

struct bad_case {
    const char *text;
    const char *expected; /* the error message */
};

static void bad_lines_name_file_and_line(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {MOSQ_ALICE "\nnocolon\n", "pw:2: expected user:hash, found no ':'"},
        {":" PY_PBKDF2, "pw:1: empty user name"},
        {"eve:plaintext", "pw:1: user \"eve\": not a $6$ or $7$ password hash (a plain-text "
                          "password? convert the file with arbor_passwd -U)"},
        {"eve:$7$abc$YXJib3Itc2FsdC0x$AAAA",
         "pw:1: user \"eve\": the iteration count of the $7$ hash is not a positive integer"},
        {"eve:$7$0$YXJib3Itc2FsdC0x$AAAA",
         "pw:1: user \"eve\": the iteration count of the $7$ hash is not a positive integer"},
        {"eve:$7$5$Y!Jib3Itc2FsdC0x$AAAA",
         "pw:1: user \"eve\": the salt of the hash is not base64 (of at most 64 bytes)"},
        {"eve:$7$5$YXJib3Itc2FsdC0x",
         "pw:1: user \"eve\": the salt of the hash is not base64 (of at most 64 bytes)"},
        {"eve:$7$5$YXJib3Itc2FsdC0x$AAAA",
         "pw:1: user \"eve\": the hash is not the base64 of 64 bytes (SHA512)"},
        {"eve:$6$YXJib3Itc2FsdC0x$YXJi", "pw:1: user \"eve\": the hash is not the base64 of 64 "
                                         "bytes (SHA512)"},
        {"#\n" MOSQ_BOB "\n" MOSQ_BOB "\n", "pw:3: user \"bob\" is already given at line 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct password_table *table = (void *)1;
        char err[512];
        assert_int_equal(password_table_parse(cases[i].text, "pw", &table, err, sizeof err), -1);
        assert_null(table);
        assert_string_equal(err, cases[i].expected);
        assert_null(strstr(err, "AAAA")); /* never the hash */
    }
}

static void missing_file_is_an_error(void **state)
{
    (void)state;
    struct password_table *table;
    char err[512];
    assert_int_equal(password_table_load("/nonexistent/pw", &table, err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent/pw: cannot open: No such file or directory");
}

static void load_config(struct arbor_config *cfg, const char *text)
{
    char err[512];
    config_init_defaults(cfg);
    int status = config_load_string(cfg, text, "test.conf", err, sizeof err);
    if (status != 0) fail_msg("%s", err);
}

/* password_file is global unless per_listener_settings is true, as allow_anonymous. */
static void config_scopes_password_file(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_config(&cfg, "listener 1883\npassword_file /etc/pw\nlistener 1884\n");
    assert_string_equal(cfg.security.password_file, "/etc/pw");
    assert_null(cfg.listeners[0].security.password_file);
    assert_ptr_equal(config_security_for(&cfg, &cfg.listeners[1]), &cfg.security);
    config_free(&cfg);

    load_config(&cfg, "per_listener_settings true\nlistener 1883\npassword_file a\n"
                      "listener 1884\npassword_file b\nlistener 1885\n");
    assert_null(cfg.security.password_file);
    assert_string_equal(config_security_for(&cfg, &cfg.listeners[0])->password_file, "a");
    assert_string_equal(config_security_for(&cfg, &cfg.listeners[1])->password_file, "b");
    assert_null(config_security_for(&cfg, &cfg.listeners[2])->password_file);
    config_free(&cfg);

    char err[512];
    config_init_defaults(&cfg);
    assert_int_equal(config_load_string(&cfg, "listener 1883\npassword_file a\npassword_file b\n",
                                        "test.conf", err, sizeof err),
                     -1);
    assert_string_equal(err, "test.conf:3: password_file: given more than once");
    config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(python_vectors_verify),
        cmocka_unit_test(mosquitto_file_loads_and_checks),
        cmocka_unit_test(created_hashes_round_trip),
        cmocka_unit_test(bad_lines_name_file_and_line),
        cmocka_unit_test(missing_file_is_an_error),
        cmocka_unit_test(config_scopes_password_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
