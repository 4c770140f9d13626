/* zlib deflate at level 1 of 2 MB of word-like text, one stream per iteration.
   Prints ms per repetition. */
#include "zlib.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* run.py --clock cpu (the default) builds with -DBENCH_CLOCK=CLOCK_PROCESS_CPUTIME_ID: this
   process's CPU time, which other work on a shared machine delays far less than wall time */
#ifndef BENCH_CLOCK
#define BENCH_CLOCK CLOCK_MONOTONIC
#endif
static double now(void){struct timespec t;clock_gettime(BENCH_CLOCK,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  int reps=argc>1?atoi(argv[1]):10; int iters=argc>2?atoi(argv[2]):1; int level=argc>3?atoi(argv[3]):1;
  enum{N=2<<20}; unsigned char*in=malloc(N); uLong bound=compressBound(N); unsigned char*out=malloc(bound);
  static const char*w[]={"the ","of ","and ","compression ","a ","speed ","to ","in ","is ","data ","block ","that ","for ","it ","with ","as ","was ","on ","buffer ","fast "};
  unsigned s=1; size_t p=0; while(p<N){ s=s*1103515245u+12345u; const char*x=w[(s>>16)%20]; size_t l=strlen(x); if(p+l>N) l=N-p; memcpy(in+p,x,l); p+=l; if(((s>>8)&63)==0 && p<N) in[p++]=(unsigned char)('A'+(s>>24)%26); }
  uLongf olen=0;
  for(int r=-1;r<reps;r++){ double t0=now();
    for(int it=0;it<iters;it++){ olen=bound; if(compress2(out,&olen,in,N,level)!=Z_OK) return 2; }
    double t=now()-t0; if(r>=0) printf("%.4f\n",t); }
  fprintf(stderr,"ratio %.3f\n",(double)N/olen); return 0;
}
