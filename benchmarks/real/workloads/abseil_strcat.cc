/* absl::StrCat of two 100-byte strings (the two-argument overload, absl/strings/str_cat.cc),
   `iters` times per repetition. Prints ms per repetition; one unprinted warm-up repetition. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <string>

#include "absl/strings/str_cat.h"
/* run.py --clock cpu (the default) builds with -DBENCH_CLOCK=CLOCK_PROCESS_CPUTIME_ID */
#ifndef BENCH_CLOCK
#define BENCH_CLOCK CLOCK_MONOTONIC
#endif
static double now(void){struct timespec t;clock_gettime(BENCH_CLOCK,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  int reps=argc>1?atoi(argv[1]):10; long iters=argc>2?atol(argv[2]):200000;
  std::string a(100,'a'), b(100,'b'); unsigned s=12345;
  for(size_t i=0;i<a.size();i++){s=s*1103515245u+12345u; a[i]=(char)('a'+(s>>16)%26); b[i]=(char)('A'+(s>>8)%26);}
  unsigned long acc=0;
  for(int r=-1;r<reps;r++){ double t0=now();
    for(long it=0;it<iters;it++){ a[0]=(char)('a'+it%26); std::string c=absl::StrCat(a,b); acc+=(unsigned char)c[(size_t)it%c.size()]; }
    double t=now()-t0; if(r>=0) printf("%.4f\n",t); }
  fprintf(stderr,"acc %lu\n",acc);
  return 0;
}
