/*
 * topic.h: topic names and topic filters: validation, matching, and shared-subscription
 * parsing. Pure functions over byte strings (not NUL-terminated).
 */
#ifndef ARBOR_TOPIC_H
#define ARBOR_TOPIC_H

#include <stdbool.h>
#include <stddef.h>

/* Topic names and filters may have at most this many '/' separators (201 levels): deeper ones
 * are refused, though MQTT allows them. The same limit as Mosquitto 2.0, which keeps matching
 * cheap and bounded. */
#define TOPIC_MAX_SEPARATORS 200

/* A topic name for PUBLISH: non-empty, no '+' or '#', at most TOPIC_MAX_SEPARATORS '/'.
 * (UTF-8 is checked by the decoder.) */
bool topic_name_is_valid(const char *topic, size_t len);

/* A topic filter for SUBSCRIBE/UNSUBSCRIBE: non-empty; '#' only as the whole last level;
 * '+' only as a whole level; at most TOPIC_MAX_SEPARATORS '/'. Shared filters must be passed
 * through topic_parse_shared first (or use topic_subscription_filter_is_valid). */
bool topic_filter_is_valid(const char *filter, size_t len);

/* What a client may put in SUBSCRIBE or UNSUBSCRIBE: a valid filter, or a well-formed
 * "$share/<group>/<filter>" whose inner filter is valid; no NUL byte. The one decision both
 * packets share, so UNSUBSCRIBE never accepts a filter SUBSCRIBE refuses. */
bool topic_subscription_filter_is_valid(const char *filter, size_t len);

/* The same decision with the reason for a refusal: TOPIC_FILTER_MALFORMED for a string that
 * breaks the rules of MQTT (4.7, 4.8.2), TOPIC_FILTER_TOO_DEEP for a filter MQTT allows
 * but with more than TOPIC_MAX_SEPARATORS '/' (in the filter of a shared subscription). */
enum topic_filter_verdict {
    TOPIC_FILTER_VALID,
    TOPIC_FILTER_MALFORMED,
    TOPIC_FILTER_TOO_DEEP,
};
enum topic_filter_verdict topic_subscription_filter_check(const char *filter, size_t len);

/* Does topic (a valid name) match filter (a valid filter)? Names starting with '$' are not
 * matched by a filter whose first level is '+' or '#'. */
bool topic_matches(const char *filter, size_t filter_len, const char *topic, size_t topic_len);

/* Shared subscriptions: "$share/<group>/<filter>". Returns:
 *  0 and sets *is_shared=false if filter does not start with "$share/";
 *  0 and sets group/inner on a well-formed shared filter (group non-empty, no '+', '#' or '/');
 * -1 if it starts with "$share/" but is malformed (missing group or filter). */
int topic_parse_shared(const char *filter, size_t len, bool *is_shared, const char **group,
                       size_t *group_len, const char **inner, size_t *inner_len);

/* Topics clients may not publish to (a valid name assumed), as Mosquitto 2.0 decides: any name
 * starting with "$SYS" except the bridge state topics "$SYS/broker/connection/<name>/state",
 * and any starting with "$share" (a subscription syntax, never a topic). Other '$' topics are
 * ordinary. */
bool topic_is_reserved_for_broker(const char *topic, size_t len);

/* MQTT-ST's own messages between brokers ("$MQTT-ST/...", docs/mqtt-st-protocol.md 7.5):
 * peers carry them, clients may read them, but no client, will or bridge may publish one. */
#define TREE_CONTROL_PREFIX "$MQTT-ST/"
bool topic_is_tree_control(const char *topic, size_t len);

#endif
