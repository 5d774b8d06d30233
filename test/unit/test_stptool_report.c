/*
 * test_stptool_report.c: unit tests for tools/stp_report.c, what `arbor_stp show` prints: the
 * table (every broker value with its label, "-" for absent ones, one aligned row per peer with
 * forwarding as yes/no) and the JSON object (the $SYS tree's shape, numbers as numbers,
 * forwarding as a boolean, absent values as null).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stp_report.h"
#include "stptool_fixture.h"

static char *table_of(const struct stp_view *v)
{
    struct capture c;
    stp_report_table(capture_start(&c), v);
    return capture_end(&c);
}

static void test_table(void **state)
{
    (void)state;
    struct stp_view v;
    sample_view(&v);
    char *text = table_of(&v);
    const char *want =
        "id                   10.0.0.3:1883\n"
        "capability           3000\n"
        "root id              10.0.0.1:1883\n"
        "root capability      5000\n"
        "root path cost (us)  4567\n"
        "root link            10.0.0.2:1883\n"
        "hops                 2\n"
        "epoch                4\n"
        "topology changes     3\n"
        "settling             0\n"
        "BPDUs sent           120\n"
        "BPDUs received       118\n"
        "BPDUs rejected       0\n"
        "messages forwarded   10\n"
        "messages received    5\n"
        "messages duplicates  1\n"
        "messages discarded   0\n"
        "messages off tree    -\n"
        "messages resynced    2\n"
        "messages lost        0\n"
        "messages dropped     0\n"
        "messages skipped     7\n"
        "skip notices         3\n"
        "\n"
        "peer            state  role     forwarding  wants  told        srtt_us  cost_us  "
        "bpdus_sent  bpdus_received  resync_messages  resync_bytes\n"
        "10.0.0.2:1883   up     root     yes         2      everything     2345     2300  "
        "        60              59                0             0\n"
        "10.0.0.14:1883  up     blocked  no          -      -             15000    14800  "
        "        60              61                -             -\n"
        "\n"
        "10.0.0.2:1883 wants these filters:\n"
        "  shop/+/temp\n"
        "  site/#\n";
    assert_string_equal(text, want);
    free(text);
    stp_view_free(&v);
}

static void test_table_absent_values(void **state)
{
    (void)state;
    struct stp_view v;
    stp_view_init(&v);
    put(&v, "id", "10.0.0.1:1883");
    put(&v, "root/id", "10.0.0.1:1883");
    char *text = table_of(&v);
    assert_non_null(strstr(text, "\nroot link            -\n"));
    assert_non_null(strstr(text, "\nhops                 -\n"));
    assert_non_null(strstr(text, "\n\nno peer links\n"));
    free(text);

    /* a link that is not up yet: no role, not forwarding */
    put(&v, "peers/10.0.0.2:1883/state", "connecting");
    put(&v, "peers/10.0.0.2:1883/forwarding", "0");
    text = table_of(&v);
    assert_non_null(strstr(text, "\n10.0.0.2:1883  connecting  -     no          "));
    free(text);
    stp_view_free(&v);
}

static const cJSON *item(const cJSON *object, const char *name)
{
    const cJSON *found = cJSON_GetObjectItemCaseSensitive(object, name);
    assert_non_null(found);
    return found;
}

static void test_json(void **state)
{
    (void)state;
    struct stp_view v;
    sample_view(&v);
    put(&v, "root/link", ""); /* cleared: null */
    cJSON *json = stp_report_json(&v);
    assert_non_null(json);
    assert_string_equal(item(json, "id")->valuestring, "10.0.0.3:1883");
    assert_true(cJSON_IsNumber(item(json, "capability")));
    assert_int_equal(item(json, "capability")->valuedouble, 3000);
    const cJSON *root = item(json, "root");
    assert_string_equal(item(root, "id")->valuestring, "10.0.0.1:1883");
    assert_int_equal(item(root, "cost_us")->valuedouble, 4567);
    assert_true(cJSON_IsNull(item(root, "link")));
    assert_int_equal(item(json, "topology_changes")->valuedouble, 3);
    assert_int_equal(item(item(json, "bpdus"), "received")->valuedouble, 118);
    assert_int_equal(item(item(json, "messages"), "resynced")->valuedouble, 2);

    const cJSON *peers = item(json, "peers");
    assert_true(cJSON_IsArray(peers));
    assert_int_equal(cJSON_GetArraySize(peers), 2);
    const cJSON *first = cJSON_GetArrayItem(peers, 0), *second = cJSON_GetArrayItem(peers, 1);
    assert_string_equal(item(first, "id")->valuestring, "10.0.0.2:1883");
    assert_string_equal(item(first, "role")->valuestring, "root");
    assert_true(cJSON_IsTrue(item(first, "forwarding")));
    assert_int_equal(item(first, "srtt_us")->valuedouble, 2345);
    assert_int_equal(item(item(first, "bpdus"), "sent")->valuedouble, 60);
    const cJSON *interest = item(first, "interest");
    assert_string_equal(item(interest, "wanted")->valuestring, "2");
    const cJSON *filters = item(interest, "filters"); /* one line, one string */
    assert_true(cJSON_IsArray(filters));
    assert_int_equal(cJSON_GetArraySize(filters), 2);
    assert_string_equal(cJSON_GetArrayItem(filters, 0)->valuestring, "shop/+/temp");
    assert_string_equal(cJSON_GetArrayItem(filters, 1)->valuestring, "site/#");
    assert_string_equal(item(second, "id")->valuestring, "10.0.0.14:1883");
    assert_true(cJSON_IsFalse(item(second, "forwarding")));
    assert_int_equal(item(item(second, "bpdus"), "received")->valuedouble, 61);
    cJSON_Delete(json);
    stp_view_free(&v);
}

static void test_json_odd_values(void **state)
{
    (void)state;
    struct stp_view v;
    stp_view_init(&v);
    put(&v, "id", "10.0.0.1:1883");
    put(&v, "hops", "many"); /* not a number: kept as text */
    put(&v, "peers/10.0.0.2:1883/state", "connecting");
    /* filters holding a line feed and a backslash, escaped by the broker (peer_sys.c) */
    put(&v, "peers/10.0.0.2:1883/interest/filters", "a\\nb/#\nc\\\\d\ne\\x");
    cJSON *json = stp_report_json(&v);
    assert_string_equal(item(json, "hops")->valuestring, "many");
    assert_true(cJSON_IsNull(item(json, "epoch")));
    const cJSON *peer = cJSON_GetArrayItem(item(json, "peers"), 0);
    assert_true(cJSON_IsNull(item(peer, "role")));
    assert_true(cJSON_IsNull(item(peer, "forwarding")));
    assert_true(cJSON_IsNull(item(item(peer, "bpdus"), "sent")));
    const cJSON *filters = item(item(peer, "interest"), "filters");
    assert_int_equal(cJSON_GetArraySize(filters), 3);
    assert_string_equal(cJSON_GetArrayItem(filters, 0)->valuestring, "a\nb/#");
    assert_string_equal(cJSON_GetArrayItem(filters, 1)->valuestring, "c\\d");
    assert_string_equal(cJSON_GetArrayItem(filters, 2)->valuestring, "e\\x"); /* not an escape */
    cJSON_Delete(json);
    stp_view_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_table_absent_values),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_odd_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
