/* zlib-ng #1935's workload: 1000 random bytes written 100 times, compressed at level 6
   (deflate_medium) in one stream. Prints ms per repetition (iters streams each). */
#include "zlib.h"
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
  int reps=argc>1?atoi(argv[1]):10; int iters=argc>2?atoi(argv[2]):200;
  static unsigned char in[100000], out[200000]; unsigned s=12345;
  for(int i=0;i<1000;i++){s=s*1103515245u+12345u; in[i]=(unsigned char)(s>>16);}
  for(int k=1;k<100;k++) for(int i=0;i<1000;i++) in[k*1000+i]=in[i];
  unsigned long total=0;
  for(int r=-1;r<reps;r++){ double t0=now();
    for(int it=0;it<iters;it++){ z_stream z={0}; if(deflateInit(&z,6)!=Z_OK) return 2;
      for(int k=0;k<100;k++){ z.next_in=in+k*1000; z.avail_in=1000; z.next_out=out+z.total_out; z.avail_out=sizeof out-z.total_out; if(deflate(&z,Z_NO_FLUSH)==Z_STREAM_ERROR) return 3; }
      z.avail_in=0; z.next_out=out+z.total_out; z.avail_out=sizeof out-z.total_out; if(deflate(&z,Z_FINISH)!=Z_STREAM_END) return 4;
      total+=z.total_out; deflateEnd(&z); }
    double t=now()-t0; if(r>=0) printf("%.4f\n",t); }
  fprintf(stderr,"bytes %lu\n", total/(unsigned long)(reps+1)/iters);
  return 0;
}
