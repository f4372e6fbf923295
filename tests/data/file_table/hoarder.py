"""Red team round 47 (tests/unit/test_file_table.py): 30,000 files mapped and closed, held 15 s at
import by a chain the guard's looks by pid cannot follow. ARGS picks the chain (the test rewrites
that line): `forkchain`, forked processes each exiting as its child goes on, the files 16 folders
deep so that a holder is gone before its maps are read; `vforkkill`, vfork children sharing one
address space, each killing its waiting parent, behind 800 unreaped zombies."""
import math
import os
import sys
import time

import torch
import torch.nn as nn

SOURCE = r"""#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
/* argv: mode n path hold_s [linger_us]
   mode static:    one process maps n files and sleeps (control: the guard must kill it)
   mode forkchain: one process maps n files, then forever: fork(); parent _exit()s at once (after
                   linger_us), the child goes on (each child inherits all n mappings)
   mode vforkkill: processes sharing one mm: clone(CLONE_VM|CLONE_VFORK) (allowed: "a vfork
                   child"), the child SIGKILLs its parent (waiting in vfork) and does the same */
static int waitmode, stepn; static int n, err, done, wfd = -1, linger; static const char *path; static time_t end;
static char *stacks; static volatile unsigned idx;
#define RING 64
#define STK 65536
static int deepfd = AT_FDCWD; static const char *leaf;
static void make_deep(const char *base, int depth) {
  char name[256]; memset(name, 'a', 250); name[250] = 0;
  int d = open(base, O_RDONLY | O_DIRECTORY);
  for (int i = 0; i < depth; i++) {
    mkdirat(d, name, 0700);
    int e = openat(d, name, O_RDONLY | O_DIRECTORY); close(d); d = e;
    if (d < 0) { err = errno; return; }
  }
  int f = openat(d, "f", O_RDWR | O_CREAT, 0600); if (f < 0) { err = errno; return; }
  char page[4096] = {0}; write(f, page, sizeof page); close(f);
  deepfd = d; leaf = "f";
}
static void map_all(void) {
  for (; done < n; done++) {
    int fd = leaf ? openat(deepfd, leaf, O_RDONLY) : open(path, O_RDONLY); if (fd < 0) { err = errno; break; }
    if (mmap(0, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED) { err = errno; close(fd); break; }
    close(fd);
  }
}
static void report(void) { if (wfd >= 0) { dprintf(wfd, "%d %d\n", err, done); close(wfd); wfd = -1; } }
static int xstep(void *first) {
  if (done < n && !err) { map_all(); report(); }
  if (time(0) > end) syscall(SYS_exit, 0);
  for (;;) {
    unsigned i = __sync_fetch_and_add(&idx, 1) % RING;
    if (clone(xstep, stacks + (size_t)(i + 1) * STK, CLONE_VM | SIGCHLD, 0) > 0) break;
    if (errno == EPERM) { dprintf(2, "vmexit: clone EPERM\n"); _exit(3); }
    usleep(100);
  }
  syscall(SYS_exit, 0);
  return 0;
}
static int vstep(void *first) {
  if (!first) {
    pid_t pp = getppid();
    int pfd = (waitmode == 2) ? (int)syscall(SYS_pidfd_open, pp, 0) : -1;
    kill(pp, SIGKILL);   /* the previous holder, in its vfork wait */
    if (waitmode == 1) sched_yield();
    if (pfd >= 0) { struct pollfd q = {pfd, POLLIN, 0}; poll(&q, 1, 100); close(pfd); }
  }
  if (done < n && !err) { map_all(); report(); }
  if (time(0) > end) _exit(0);
  if (linger) usleep(linger);
  for (;;) {
    unsigned i = __sync_fetch_and_add(&idx, 1) % RING;
    long r = clone(vstep, stacks + (size_t)(i + 1) * STK, CLONE_VM | CLONE_VFORK | SIGCHLD, 0);
    if (r > 0) { /* our child left without killing us? */ continue; }
    if (errno == EPERM) { dprintf(2, "vforkkill: clone EPERM\n"); _exit(3); }
    usleep(100);
  }
}
int main(int argc, char **argv) {
  const char *mode = argv[1]; n = atoi(argv[2]); path = argv[3]; end = time(0) + atoi(argv[4]);
  linger = argc > 5 ? atoi(argv[5]) : 0;
  waitmode = argc > 6 ? atoi(argv[6]) : 0;
  stepn = argc > 10 ? atoi(argv[10]) : 0;
  if (argc > 7 && atoi(argv[7]) > 0) {
    char base[4096]; snprintf(base, sizeof base, "%s.deep", path); mkdir(base, 0700);
    make_deep(base, atoi(argv[7]));
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int pfd[2]; pipe(pfd);
  int zombies = argc > 9 ? atoi(argv[9]) : 0;
  if (zombies > 0 && fork() == 0) {  /* decoys: children never reaped, each a pid the guard looks at */
    int made = 0;
    for (int i = 0; i < zombies; i++) { pid_t z = fork(); if (z == 0) _exit(0); if (z > 0) made++; }
    fprintf(stderr, "hoard: %d zombies\n", made);
    while (time(0) <= end + 1) sleep(1);
    _exit(0);
  }
  if (zombies > 0) usleep(300000);
  pid_t holder = fork();
  if (holder == 0) {
    close(pfd[0]); wfd = pfd[1];
    if (!strcmp(mode, "static")) { map_all(); report(); while (time(0) <= end) sleep(1); _exit(0); }
    if (!strcmp(mode, "forkchain")) {
      int chains = argc > 8 ? atoi(argv[8]) : 1, per = n / chains, got = 0;
      for (int c = 1; c < chains; c++) {  /* chains 1..: forked before mapping, each its own share */
        if (fork() == 0) { n = per; if (!stepn) { map_all(); report(); } goto chain; }
        got += per;
      }
      n = n - got;
      if (!stepn) { map_all(); report(); }
      chain:;
      unsigned long gen = 0;
      int target = 0;
      while (time(0) <= end) {
        if (stepn && done < n && !err) {  /* map `stepn` more in each generation, then hand over */
          int keep = n; target = done + stepn < n ? done + stepn : n; n = target; map_all(); n = keep;
          if (done >= n || err) report();
        }
        pid_t c = fork();
        if (c > 0) { if (linger) usleep(linger); _exit(0); }
        if (c < 0) usleep(200);
        gen++;
      }
      _exit(0);
    }
    if (!strcmp(mode, "vforkkill")) {
      int chains = argc > 8 ? atoi(argv[8]) : 1, per = n / chains, got = 0;
      for (int c = 1; c < chains; c++) {
        if (fork() == 0) { n = per; goto vchain; }
        got += per;
      }
      n = n - got;
      vchain:
      stacks = mmap(0, (size_t)RING * STK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      vstep((void *)1);
    }
    if (!strcmp(mode, "vmexit")) {
      stacks = mmap(0, (size_t)RING * STK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      xstep((void *)1);
    }
    _exit(2);
  }
  close(pfd[1]);
  int chains = ((!strcmp(mode, "forkchain") || !strcmp(mode, "vforkkill")) && argc > 8) ? atoi(argv[8]) : 1, tot = 0, e = 0;
  FILE *rf = fdopen(pfd[0], "r");
  for (int c = 0; c < chains; c++) { int a, b; if (fscanf(rf, "%d %d", &a, &b) == 2) { e |= a; tot += b; } }
  printf("ready %d %d\n", e, tot); fflush(stdout);
  unsigned long reaped = 0;
  while (time(0) <= end + 1) { if (waitpid(-1, 0, __WALL | WNOHANG) > 0) reaped++; else usleep(500); }
  fprintf(stderr, "hoard: reaped %lu\n", reaped);
  kill(0, SIGKILL);
  return 0;
}
"""
ARGS = ['forkchain', '30000', '15', '0', '0', '16', '1', '0', '500']  # the fork chain


def _run(argv, stdout=None, session=False):
    pid = os.fork()
    if pid == 0:
        if session:
            os.setsid()
        if stdout is not None:
            os.dup2(stdout, 1)
        os.execv(argv[0], argv)
    return pid


def _hoard():
    tmp = os.environ.get("TMPDIR", "/tmp")
    src, exe = os.path.join(tmp, "hoard.c"), os.path.join(tmp, "hoard")
    with open(src, "w") as f:
        f.write(SOURCE)
    _, status = os.waitpid(_run(["/usr/bin/gcc", "-O2", "-o", exe, src]), 0)
    if status:
        raise RuntimeError("gcc failed")
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = _run([exe, ARGS[0], ARGS[1], exe] + ARGS[2:], w, session=True)
    os.close(w)
    ready = os.read(r, 64).decode()
    print(f"hoard: {ready.strip()} at {time.monotonic() - t0:.2f} s", file=sys.stderr, flush=True)
    if "ready 0 " not in ready:
        raise RuntimeError(f"hoard failed: {ready}")
    os.waitpid(pid, 0)
    print(f"hoard: held until {time.monotonic() - t0:.2f} s", file=sys.stderr, flush=True)


_hoard()


class ModelNew(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
