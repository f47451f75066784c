/*
 * Regression driver for fuzz targets in builds without libFuzzer: replays every file of the
 * corpus directories given on the command line, plus deterministic variants of each (every
 * truncation of the blob and single-byte changes at every position), through
 * LLVMFuzzerTestOneInput. A crash or trap fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    for (size_t cut = 0; cut < n; cut++) /* every truncation */
        LLVMFuzzerTestOneInput(buf, cut);
    static const unsigned char flips[] = { 0x01, 0x80, 0xff };
    for (size_t i = 4; i < n && i < 512; i++) /* byte changes in the blob */
        for (size_t k = 0; k < sizeof flips; k++) {
            buf[i] ^= flips[k];
            LLVMFuzzerTestOneInput(buf, n);
            buf[i] ^= flips[k];
        }
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            if (replay_file(path) == 0)
                files++;
        }
        closedir(d);
    }
    printf("replayed %d corpus files\n", files);
    return files > 0 ? 0 : 1;
}
