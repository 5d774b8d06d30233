/*
 * utf8.h: validation of MQTT UTF-8 encoded strings (RFC 3629 well-formedness plus MQTT's
 * ban on U+0000 and on UTF-16 surrogates). Pure functions.
 */
#ifndef ARBOR_UTF8_H
#define ARBOR_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True if data[0..len) is well-formed UTF-8 with no U+0000, no surrogates (U+D800..DFFF), no
 * overlong forms and no code point above U+10FFFF. */
bool utf8_is_valid_mqtt(const uint8_t *data, size_t len);

#endif
