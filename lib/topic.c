/*
 * topic.c: the MQTT rules for topic names and filters: which strings are valid, whether a
 * filter matches a name (including the '$' rule and "a/#" matching "a"), and splitting a
 * "$share/<group>/<filter>" subscription. Pure functions over byte strings that are not
 * NUL-terminated; UTF-8 validity is the decoder's job, subscription storage the broker's.
 */
#include "topic.h"

#include <string.h>

#define SHARE_PREFIX "$share/"
#define SHARE_PREFIX_LEN (sizeof(SHARE_PREFIX) - 1)
#define TOPIC_MAX_LEN 65535u
#define SYS_PREFIX "$SYS"
#define SYS_PREFIX_LEN (sizeof(SYS_PREFIX) - 1)
#define BRIDGE_STATE_PREFIX "$SYS/broker/connection/"
#define BRIDGE_STATE_PREFIX_LEN (sizeof(BRIDGE_STATE_PREFIX) - 1)
#define BRIDGE_STATE_SUFFIX "/state"
#define BRIDGE_STATE_SUFFIX_LEN (sizeof(BRIDGE_STATE_SUFFIX) - 1)
#define SHARE_WORD "$share"
#define SHARE_WORD_LEN (sizeof(SHARE_WORD) - 1)

/* At most TOPIC_MAX_SEPARATORS '/' in s. Runs for every PUBLISH: short topics, nearly all
 * of them, cannot have too many and are not scanned. */
static bool depth_is_valid(const char *s, size_t len)
{
    if (len <= TOPIC_MAX_SEPARATORS) return true;
    size_t separators = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '/' && ++separators > TOPIC_MAX_SEPARATORS) return false;
    return true;
}

bool topic_name_is_valid(const char *topic, size_t len)
{
    if (len == 0 || len > TOPIC_MAX_LEN) return false;
    return !memchr(topic, '+', len) && !memchr(topic, '#', len) && depth_is_valid(topic, len);
}

/* The wildcard and length rules of a filter (4.7.1, [MQTT-4.7.3-1]), whatever its depth. */
static bool filter_syntax_is_valid(const char *filter, size_t len)
{
    if (len == 0 || len > TOPIC_MAX_LEN) return false;
    for (size_t i = 0; i < len; i++) {
        char c = filter[i];
        if (c != '+' && c != '#') continue;
        bool starts_level = i == 0 || filter[i - 1] == '/';
        bool ends_level = i + 1 == len || filter[i + 1] == '/';
        if (!starts_level || !ends_level) return false;
        if (c == '#' && i + 1 != len) return false;
    }
    return true;
}

bool topic_filter_is_valid(const char *filter, size_t len)
{
    return filter_syntax_is_valid(filter, len) && depth_is_valid(filter, len);
}

/* End (exclusive) of the level that starts at `start`. */
static size_t level_end(const char *s, size_t len, size_t start)
{
    const char *slash = start < len ? memchr(s + start, '/', len - start) : NULL;
    return slash ? (size_t)(slash - s) : len;
}

static bool is_single_char_level(const char *s, size_t start, size_t end, char c)
{
    return end - start == 1 && s[start] == c;
}

bool topic_matches(const char *filter, size_t filter_len, const char *topic, size_t topic_len)
{
    if (filter_len == 0 || topic_len == 0) return false;
    /* [MQTT-4.7.2-1]: wildcards in the first level never match topics starting with '$'. */
    if (topic[0] == '$' && (filter[0] == '+' || filter[0] == '#')) return false;

    size_t f = 0, t = 0;
    bool topic_exhausted = false;
    for (;;) {
        size_t f_end = level_end(filter, filter_len, f);
        if (is_single_char_level(filter, f, f_end, '#'))
            return true; /* matches the parent level too: "a/#" matches "a" */
        if (topic_exhausted) return false;
        size_t t_end = level_end(topic, topic_len, t);
        if (!is_single_char_level(filter, f, f_end, '+')) {
            if (f_end - f != t_end - t || memcmp(filter + f, topic + t, f_end - f) != 0)
                return false;
        }
        bool filter_last = f_end == filter_len;
        bool topic_last = t_end == topic_len;
        if (filter_last) return topic_last;
        f = f_end + 1;
        if (topic_last)
            topic_exhausted = true;
        else
            t = t_end + 1;
    }
}

int topic_parse_shared(const char *filter, size_t len, bool *is_shared, const char **group,
                       size_t *group_len, const char **inner, size_t *inner_len)
{
    *group = NULL;
    *group_len = 0;
    *inner = NULL;
    *inner_len = 0;
    if (len < SHARE_PREFIX_LEN || memcmp(filter, SHARE_PREFIX, SHARE_PREFIX_LEN) != 0) {
        *is_shared = false;
        return 0;
    }
    *is_shared = true;

    const char *group_start = filter + SHARE_PREFIX_LEN;
    size_t rest = len - SHARE_PREFIX_LEN;
    const char *slash = memchr(group_start, '/', rest);
    if (!slash || slash == group_start) return -1;
    size_t glen = (size_t)(slash - group_start);
    if (memchr(group_start, '+', glen) || memchr(group_start, '#', glen)) return -1;
    size_t ilen = rest - glen - 1;
    if (ilen == 0) return -1;
    *group = group_start;
    *group_len = glen;
    *inner = slash + 1;
    *inner_len = ilen;
    return 0;
}

enum topic_filter_verdict topic_subscription_filter_check(const char *filter, size_t len)
{
    bool shared;
    const char *group, *inner;
    size_t group_len, inner_len;
    if (topic_parse_shared(filter, len, &shared, &group, &group_len, &inner, &inner_len) != 0)
        return TOPIC_FILTER_MALFORMED;
    if (!shared) {
        inner = filter;
        inner_len = len;
    }
    if (!filter_syntax_is_valid(inner, inner_len) || memchr(filter, '\0', len))
        return TOPIC_FILTER_MALFORMED;
    return depth_is_valid(inner, inner_len) ? TOPIC_FILTER_VALID : TOPIC_FILTER_TOO_DEEP;
}

bool topic_subscription_filter_is_valid(const char *filter, size_t len)
{
    return topic_subscription_filter_check(filter, len) == TOPIC_FILTER_VALID;
}

static bool has_prefix(const char *s, size_t len, const char *prefix, size_t prefix_len)
{
    return len >= prefix_len && memcmp(s, prefix, prefix_len) == 0;
}

/* "$SYS/broker/connection/<name>/state" with a one-level name (Mosquitto also lets an empty
 * one through): what a Mosquitto bridge publishes about its own link on the remote broker. */
static bool is_bridge_state_topic(const char *topic, size_t len)
{
    if (len < BRIDGE_STATE_PREFIX_LEN + BRIDGE_STATE_SUFFIX_LEN ||
        !has_prefix(topic, len, BRIDGE_STATE_PREFIX, BRIDGE_STATE_PREFIX_LEN) ||
        memcmp(topic + len - BRIDGE_STATE_SUFFIX_LEN, BRIDGE_STATE_SUFFIX, BRIDGE_STATE_SUFFIX_LEN))
        return false;
    const char *name = topic + BRIDGE_STATE_PREFIX_LEN;
    size_t name_len = len - BRIDGE_STATE_PREFIX_LEN - BRIDGE_STATE_SUFFIX_LEN;
    return !memchr(name, '/', name_len);
}

bool topic_is_tree_control(const char *topic, size_t len)
{
    return has_prefix(topic, len, TREE_CONTROL_PREFIX, sizeof TREE_CONTROL_PREFIX - 1);
}

bool topic_is_reserved_for_broker(const char *topic, size_t len)
{
    if (has_prefix(topic, len, SHARE_WORD, SHARE_WORD_LEN)) return true;
    if (!has_prefix(topic, len, SYS_PREFIX, SYS_PREFIX_LEN)) return false;
    return !is_bridge_state_topic(topic, len);
}
