/*
 * utf8.c: validation of MQTT UTF-8 strings. Well-formed UTF-8 per RFC 3629 (no overlong
 * forms, no code points above U+10FFFF, no surrogates) plus MQTT's ban on U+0000.
 * It only answers yes or no: no allocation, no decoding into code points for callers.
 */
#include "utf8.h"

/* Length of the sequence a lead byte starts (0 for a byte that cannot lead one), and the
 * range the first continuation byte must fall in so that the sequence is neither overlong,
 * a surrogate, nor beyond U+10FFFF (RFC 3629 section 4). */
static size_t sequence_length(uint8_t lead, uint8_t *second_min, uint8_t *second_max)
{
    *second_min = 0x80;
    *second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 2;
    if (lead >= 0xE0 && lead <= 0xEF) {
        if (lead == 0xE0)
            *second_min = 0xA0; /* below: overlong */
        else if (lead == 0xED)
            *second_max = 0x9F; /* above: U+D800..U+DFFF surrogates */
        return 3;
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        if (lead == 0xF0)
            *second_min = 0x90; /* below: overlong */
        else if (lead == 0xF4)
            *second_max = 0x8F; /* above: beyond U+10FFFF */
        return 4;
    }
    return 0; /* 0x80..0xC1 (continuation or overlong lead) and 0xF5..0xFF */
}

bool utf8_is_valid_mqtt(const uint8_t *data, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t lead = data[i];
        if (lead < 0x80) {
            if (lead == 0)
                return false;
            i++;
            continue;
        }
        uint8_t second_min, second_max;
        size_t n = sequence_length(lead, &second_min, &second_max);
        if (n == 0 || n > len - i)
            return false;
        if (data[i + 1] < second_min || data[i + 1] > second_max)
            return false;
        for (size_t k = 2; k < n; k++) {
            if ((data[i + k] & 0xC0) != 0x80)
                return false;
        }
        i += n;
    }
    return true;
}
