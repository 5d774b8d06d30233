/*
 * utf8.c: validation of MQTT UTF-8 strings. Well-formed UTF-8 per RFC 3629 (no overlong
 * forms, no code points above U+10FFFF, no surrogates) plus MQTT's ban on U+0000.
 * It only answers yes or no: no allocation, no decoding into code points for callers.
 */
#include "utf8.h"

#include <string.h>

/* Length of the sequence a lead byte starts (0 for a byte that cannot lead one), and the
 * range the first continuation byte must fall in so that the sequence is neither overlong,
 * a surrogate, nor beyond U+10FFFF (RFC 3629 section 4). */
static size_t sequence_length(uint8_t lead, uint8_t *second_min, uint8_t *second_max)
{
    *second_min = 0x80;
    *second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
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

/* True if the 8 bytes at p are all ASCII and none is zero: the common case, checked a word
 * at a time (the classic "has zero byte" test, see Hacker's Delight 6-1). */
static bool is_plain_ascii_word(const uint8_t *p)
{
    const uint64_t high_bits = UINT64_C(0x8080808080808080);
    const uint64_t low_bits = UINT64_C(0x0101010101010101);
    uint64_t word;
    memcpy(&word, p, sizeof(word));
    bool has_zero_byte = ((word - low_bits) & ~word & high_bits) != 0;
    return (word & high_bits) == 0 && !has_zero_byte;
}

bool utf8_is_valid_mqtt(const uint8_t *data, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (len - i >= 8 && is_plain_ascii_word(data + i)) {
            i += 8;
            continue;
        }
        uint8_t lead = data[i];
        if (lead < 0x80) {
            if (lead == 0) return false;
            i++;
            continue;
        }
        uint8_t second_min, second_max;
        size_t n = sequence_length(lead, &second_min, &second_max);
        if (n == 0 || n > len - i) return false;
        if (data[i + 1] < second_min || data[i + 1] > second_max) return false;
        for (size_t k = 2; k < n; k++) {
            if ((data[i + k] & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}
