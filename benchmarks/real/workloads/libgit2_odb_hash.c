/* libgit2's object id of a 4 KiB blob, `iters` times per repetition (git_odb_hash: the object
   header and the data through git_hash_vec). Prints ms per repetition. */
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* run.py --clock cpu (the default) builds with -DBENCH_CLOCK=CLOCK_PROCESS_CPUTIME_ID */
#ifndef BENCH_CLOCK
#define BENCH_CLOCK CLOCK_MONOTONIC
#endif
static double now(void){struct timespec t;clock_gettime(BENCH_CLOCK,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  int reps=argc>1?atoi(argv[1]):10; int iters=argc>2?atoi(argv[2]):2000;
  static unsigned char buf[4096]; unsigned s=12345; git_oid oid; unsigned acc=0;
  for(size_t i=0;i<sizeof buf;i++){s=s*1103515245u+12345u; buf[i]=(unsigned char)(s>>16);}
  if(git_libgit2_init()<0) return 2;
  for(int r=-1;r<reps;r++){ double t0=now();
    for(int it=0;it<iters;it++){ buf[0]=(unsigned char)it; if(git_odb_hash(&oid,buf,sizeof buf,GIT_OBJECT_BLOB)<0) return 3; acc+=oid.id[0]; }
    double t=now()-t0; if(r>=0) printf("%.4f\n",t); }
  fprintf(stderr,"acc %u\n",acc);
  git_libgit2_shutdown();
  return 0;
}
