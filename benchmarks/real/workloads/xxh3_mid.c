/* Hash 100-byte keys (the 17..128-byte path that xxHash 7221be4 changed) with XXH3_64bits.
   Prints ms per repetition of `iters` hashes; one unprinted warm-up repetition. */
#ifndef XXH_BENCH_LEN
#define XXH_BENCH_LEN 100
#endif
#define XXH_INLINE_ALL  /* how Arrow and most vendors use it: the hash inlined into the caller */
#include "xxhash.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* run.py --clock cpu (the default) builds with -DBENCH_CLOCK=CLOCK_PROCESS_CPUTIME_ID: this
   process's CPU time, which other work on a shared machine delays far less than wall time */
#ifndef BENCH_CLOCK
#define BENCH_CLOCK CLOCK_MONOTONIC
#endif
static double now(void){struct timespec t;clock_gettime(BENCH_CLOCK,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  int reps=argc>1?atoi(argv[1]):10; long iters=argc>2?atol(argv[2]):4000000;
  unsigned char buf[256]; for(int i=0;i<256;i++) buf[i]=(unsigned char)(i*131+7);
  volatile unsigned long long sink=0;
  for(int r=-1;r<reps;r++){ double t0=now(); unsigned long long acc=0;
    for(long i=0;i<iters;i++){ size_t len=XXH_BENCH_LEN; acc+=XXH3_64bits(buf+(i&63),len)^acc>>7; }
    sink+=acc; double t=now()-t0; if(r>=0) printf("%.4f\n",t); }
  return sink==42;
}
