/* LZ4 block compression + decompression of 4 MB of word-like text (a Silesia/Calgary stand-in).
   Prints ms per repetition; argv[3] = "c" (compress only), "d" (decompress only) or "cd". */
#include "lz4.h"
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
  int reps=argc>1?atoi(argv[1]):10; int iters=argc>2?atoi(argv[2]):4; const char*mode=argc>3?argv[3]:"cd";
  enum{N=4<<20}; char*in=malloc(N),*cmp=malloc(LZ4_compressBound(N)),*out=malloc(N);
  static const char*w[]={"the ","of ","and ","compression ","a ","speed ","to ","in ","is ","data ","block ","that ","for ","it ","with ","as ","was ","on ","buffer ","fast "};
  unsigned s=1; size_t p=0; while(p<N){ s=s*1103515245u+12345u; const char*x=w[(s>>16)%20]; size_t l=strlen(x); if(p+l>N) l=N-p; memcpy(in+p,x,l); p+=l; if(((s>>8)&63)==0 && p<N) in[p++]=(char)('A'+(s>>24)%26); }
  int c=LZ4_compress_default(in,cmp,N,LZ4_compressBound(N)); if(c<=0) return 2;
  for(int r=-1;r<reps;r++){ double t0=now();
    for(int it=0;it<iters;it++){
      if(strchr(mode,'c')) c=LZ4_compress_default(in,cmp,N,LZ4_compressBound(N));
      if(strchr(mode,'d')){ if(LZ4_decompress_safe(cmp,out,c,N)!=N) return 3; } }
    double t=now()-t0; if(r>=0) printf("%.4f\n",t); }
  if(memcmp(in,out,N) && strchr(mode,'d')) return 4;
  fprintf(stderr,"ratio %.3f\n",(double)N/c); return 0;
}
