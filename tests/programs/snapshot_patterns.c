// A program whose heap at exit is exactly known, for the snapshot tests:
//   - g_list: a 10-node list reachable from a global (nodes of 32 bytes)
//   - a 48-byte block reachable only from a thread's stack (the thread blocks until exit)
//   - a leaked binary tree of 7 nodes of 64 bytes (its root pointer overwritten)
//   - a 100-byte block held only by an interior pointer (g_interior = block + 40)
//   - a leaked cycle of two 24-byte blocks
//   - a 200-byte block reachable from a global, pointing to a 300-byte child
// Prints the addresses so that the test can match them with the snapshot.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node { struct node *next; long pad[3]; };
struct tree { struct tree *left, *right; long pad[6]; };
struct pair { struct pair *other; long pad[2]; };

struct node *g_list;
char *g_interior;
void **g_parent;
static volatile uintptr_t g_scratch;
static int g_pipe[2];

static struct tree *make_tree(int depth) {
  if (!depth) return NULL;
  struct tree *t = malloc(sizeof *t);
  memset(t, 0, sizeof *t);
  t->left = make_tree(depth - 1);
  t->right = make_tree(depth - 1);
  return t;
}

static void *holder(void *arg) {
  (void)arg;
  char *mine = malloc(48);
  memset(mine, 1, 48);
  printf("stack_only %p\n", (void *)mine);
  fflush(stdout);
  char c;
  // Blocks until the process exits; `mine` lives only in this frame.
  while (read(g_pipe[0], &c, 1) != 0) {}
  g_scratch = (uintptr_t)mine;
  return NULL;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IONBF, 0);  // no stdio buffer block in the heap
  for (int i = 0; i < 10; ++i) {
    struct node *n = malloc(sizeof *n);
    memset(n, 0, sizeof *n);
    n->next = g_list;
    g_list = n;
  }
  printf("list_head %p\n", (void *)g_list);
  struct tree *t = make_tree(3);
  printf("tree_root %p\n", (void *)t);
  t = NULL;
  char *b = malloc(100);
  memset(b, 0, 100);
  g_interior = b + 40;
  printf("interior %p\n", (void *)b);
  b = NULL;
  struct pair *x = malloc(sizeof *x), *y = malloc(sizeof *y);
  memset(x, 0, sizeof *x);
  memset(y, 0, sizeof *y);
  x->other = y;
  y->other = x;
  printf("cycle %p %p\n", (void *)x, (void *)y);
  x = y = NULL;
  g_parent = malloc(200);
  memset(g_parent, 0, 200);
  g_parent[3] = malloc(300);
  memset(g_parent[3], 0, 300);
  printf("parent %p child %p\n", (void *)g_parent, g_parent[3]);
  if (pipe(g_pipe) != 0) return 1;
  pthread_t th;
  pthread_create(&th, NULL, holder, NULL);
  usleep(100000);
  // Scrub this frame's copies of the pointers before exit (the compiler may keep them).
  volatile char scrub[4096];
  memset((char *)scrub, 0, sizeof scrub);
  return 0;
}
