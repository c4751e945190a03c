// Replaces existing files of one large directory the two ways an atomic write can: the new
// file made in the same directory (rsync's way) or in a staging directory beside it (the
// store's), then renamed over the old one; nothing flushed. Prints the time for N files.
// DIR must hold big/item0.json ... big/item{(N-1)*100}.json (e.g. 100,000 files) and staging/.
// MODE 2 times the renames alone, as a batch makes them after its commit: N files are made in
// staging/ first (not timed), then renamed to new names in big/ (which may be empty).
//   cc -O2 -o /tmp/rename-dirs Benchmarks/tools/rename-dirs.c -lpthread
//   /tmp/rename-dirs DIR N MODE THREADS     MODE 0: same directory, 1: staging directory, 2: renames alone
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
static const char *dir; static int n, mode, threads;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void *work(void *arg){ long k=(long)arg; char buf[512]; memset(buf,'b',512);
  if(mode==2){ for(int i=k;i<n;i+=threads){ char tmp[4096], dst[4096];
      snprintf(tmp,sizeof tmp,"%s/staging/tmp%d",dir,i); snprintf(dst,sizeof dst,"%s/big/new%d.json",dir,i);
      if(rename(tmp,dst)){perror("rename");exit(1);} }
    return 0; }
  for(int i=k;i<n;i+=threads){ char tmp[4096], dst[4096];
    snprintf(dst,sizeof dst,"%s/big/item%d.json",dir,i*100);
    if(mode==0) snprintf(tmp,sizeof tmp,"%s/big/.tmp%d",dir,i); else snprintf(tmp,sizeof tmp,"%s/staging/tmp%d",dir,i);
    int fd=open(tmp,O_CREAT|O_EXCL|O_WRONLY,0644); if(fd<0){perror(tmp);exit(1);} write(fd,buf,512); close(fd);
    if(rename(tmp,dst)){perror("rename");exit(1);} }
  return 0;}
int main(int c,char**v){dir=v[1];n=atoi(v[2]);mode=atoi(v[3]);threads=atoi(v[4]);
  if(mode==2) for(int i=0;i<n;i++){ char tmp[4096]; char buf[512]; memset(buf,'b',512); snprintf(tmp,sizeof tmp,"%s/staging/tmp%d",dir,i);
    int fd=open(tmp,O_CREAT|O_EXCL|O_WRONLY,0644); if(fd<0){perror(tmp);exit(1);} write(fd,buf,512); close(fd); }
  pthread_t t[16]; double s=now(); for(long k=0;k<threads;k++)pthread_create(&t[k],0,work,(void*)k); for(int k=0;k<threads;k++)pthread_join(t[k],0);
  printf("mode %s threads %d: %.1f ms for %d %s\n",mode==2?"renames-alone":mode?"staging-dir":"same-dir",threads,(now()-s)*1e3,n,mode==2?"renames":"replacements");}
