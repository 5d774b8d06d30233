/*
 * standalone_main.h: the main() a fuzz target gets when built with -DARBOR_FUZZ_STANDALONE
 * (any compiler, no libFuzzer): it runs LLVMFuzzerTestOneInput once on each file named on the
 * command line, so a corpus or a crash file replays as a regression test. Each target includes
 * it at its end, after defining LLVMFuzzerTestOneInput.
 */
#ifndef ARBOR_FUZZ_STANDALONE_MAIN_H
#define ARBOR_FUZZ_STANDALONE_MAIN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any over-read */
        if (!copy) return 1;
        memcpy(copy, buf, n);
        LLVMFuzzerTestOneInput(copy, n);
        free(copy);
    }
    return 0;
}

#endif
