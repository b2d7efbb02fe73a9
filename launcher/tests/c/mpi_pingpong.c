/* A ping-pong of two MPI ranks: rank 0 sends N messages of LEN bytes, each filled with
 * its round's number, rank 1 answers each with the next number; rank 0 checks every
 * answer. Each rank prints its rank, the host it ran on (VERBS_EMU_HOST) and the count. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 100, LEN = 4096 };

int main(int argc, char **argv)
{
    static char buf[LEN];
    int rank, size, i, j;
    const char *host = getenv("VERBS_EMU_HOST");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 0; i < N; i++) {
        if (rank == 0) {
            memset(buf, i & 0xff, LEN);
            MPI_Send(buf, LEN, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, LEN, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (j = 0; j < LEN; j++) {
                if (buf[j] != (char)((i + 1) & 0xff)) {
                    printf("round %d byte %d: %d\n", i, j, buf[j]);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
        } else if (rank == 1) {
            MPI_Recv(buf, LEN, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            memset(buf, (i + 1) & 0xff, LEN);
            MPI_Send(buf, LEN, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    }
    printf("rank %d of %d on %s: %d round trips of %d bytes\n", rank, size,
           host ? host : "?", N, LEN);
    MPI_Finalize();
    return 0;
}
