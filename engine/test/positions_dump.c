/* Helper for test_positions.py: prints the engine's float64 rotary values as hex floats. */
#include <stdio.h>
#include <stdlib.h>

#include "seq.h"

int main(int argc, char **argv) {
    if (argc == 3 && argv[1][0] == 's') {
        int f = atoi(argv[2]);
        printf("%a\n", vdn_frame_span(f));
        for (int k = 0; k < f; k++)
            printf("%a\n", vdn_frame_time(k));
        return 0;
    }
    if (argc == 5 && argv[1][0] == 'g') {
        int D = atoi(argv[2]), lh = atoi(argv[3]), lw = atoi(argv[4]);
        double g[4096];
        vdn_rope_grid(g, D, 2, lh, lw);
        for (int i = 0; i < D / 2; i++)
            printf("%a\n", g[i]);
        return 0;
    }
    fprintf(stderr, "usage: positions_dump span F | grid D lat_h lat_w\n");
    return 2;
}
