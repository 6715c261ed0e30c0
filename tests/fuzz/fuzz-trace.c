/* Fuzz target for access traces (supervisor/traces/traceformat.c): any
 * bytes are refused or parsed; what parses formats back to text that
 * parses the same, and merges with a run without breaking its bounds. */
#include <stdlib.h>
#include <string.h>

#include "traceformat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct trace t = {}, again = {}, run = { .name = "f" };
        const char *why = NULL;

        if (trace_parse((const char *)data, size, &t, &why) != 0)
                return 0;
        char *text = trace_format(&t);
        if (!text || trace_parse(text, strlen(text), &again, &why) != 0 || again.n_files != t.n_files ||
            again.runs != t.runs || trace_bytes(&again) != trace_bytes(&t))
                abort(); /* a trace tierd writes must read back the same */
        free(text);
        if (trace_add(&run, "a", "k", 100, 0, 10, 0, size & 1) == 0 && trace_merge(&t, &run) == 0)
                for (size_t i = 0; i < t.n_files; i++)
                        for (size_t j = 0; j < t.files[i].n; j++)
                                if (t.files[i].r[j].start >= t.files[i].r[j].end || t.files[i].r[j].last > t.runs)
                                        abort();
        trace_done(&run);
        trace_done(&again);
        trace_done(&t);
        return 0;
}
