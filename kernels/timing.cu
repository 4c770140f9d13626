// attrib's own timing helpers, compiled next to every benchmark kernel (attrib/gpu/protocol.py).

// Holds the stream for `ns` nanoseconds so that the host can enqueue a whole block of
// launches behind it: the start event then fires right before the first kernel instead of
// measuring how fast Python launches (nvbench's "blocking kernel", without a host flag).
extern "C" __global__ void attrib_hold(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

// The SM clock as nvbench reads it: clock64 cycles over %globaltimer nanoseconds, both read
// by one thread on one SM over `ns` nanoseconds (clock64 is per SM, so one thread must take
// both ends). out[0] = cycles, out[1] = nanoseconds.
extern "C" __global__ void attrib_clock(unsigned long long ns, unsigned long long* out) {
    unsigned long long t0, t1;
    long long c0, c1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    c0 = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < ns);
    c1 = clock64();
    out[0] = (unsigned long long)(c1 - c0);
    out[1] = t1 - t0;
}
