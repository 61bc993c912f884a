/* An MPI program of roce-emu's tests (tools/roce/tests/exec_mpi.rs): ranks 0 and 1 ping-pong
 * 1 MiB ten times, each side checking and changing every word; then every rank sends every
 * other 1024 words in one MPI_Alltoall, and every word is checked. Prints "ranks N bad B" on
 * rank 0 and exits non-zero when any word was wrong. With the argument "lat" (bench/middleware.sh)
 * ranks 0 and 1 first ping-pong 8 bytes 20000 times and rank 0 prints the typical (median)
 * one-way latency, half a round trip, as "lat_us X". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y);
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "lat") == 0 && size >= 2 && rank < 2) {
    enum { warm = 1000, iters = 20000 }; char b[8] = {0}; double *t = malloc(iters * sizeof(double));
    for (int it = 0; it < warm + iters; it++) {
      double t0 = MPI_Wtime();
      if (rank == 0) { MPI_Send(b, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD); MPI_Recv(b, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
      else { MPI_Recv(b, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(b, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD); }
      if (it >= warm) t[it - warm] = MPI_Wtime() - t0;
    }
    if (rank == 0) { qsort(t, iters, sizeof(double), cmp); printf("lat_us %.2f\n", t[iters / 2] / 2 * 1e6); }
    free(t);
  }
  const int n = 1 << 18; int *buf = malloc(n * sizeof(int)); int bad = 0;
  for (int it = 0; it < 10; it++) {
    if (rank == 0) { for (int i = 0; i < n; i++) buf[i] = i * 7 + it; MPI_Send(buf, n, MPI_INT, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, n, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); for (int i = 0; i < n; i++) bad += buf[i] != i * 7 + it + 1; }
    else if (rank == 1) { MPI_Recv(buf, n, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); for (int i = 0; i < n; i++) { bad += buf[i] != i * 7 + it; buf[i]++; }
      MPI_Send(buf, n, MPI_INT, 0, 0, MPI_COMM_WORLD); }
  }
  int *s = malloc(size * 1024 * sizeof(int)), *r = malloc(size * 1024 * sizeof(int));
  for (int p = 0; p < size; p++) for (int i = 0; i < 1024; i++) s[p * 1024 + i] = rank * 100000 + p * 1000 + i;
  MPI_Alltoall(s, 1024, MPI_INT, r, 1024, MPI_INT, MPI_COMM_WORLD);
  for (int p = 0; p < size; p++) for (int i = 0; i < 1024; i++) bad += r[p * 1024 + i] != p * 100000 + rank * 1000 + i;
  int total; MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("ranks %d bad %d\n", size, total);
  MPI_Finalize(); return total != 0;
}
