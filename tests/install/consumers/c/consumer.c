/* A C program outside the mcdma tree, as an app would be: it sees only the
 * installed <mcdma/mcdma.h> and links the installed libmcdma. Against a real
 * daemon (MCDMA_SOCKET): one session serves a service, another calls it;
 * one exports a buffer, the other reads and writes it, every byte checked.
 * Prints "consumer-c: ok" and exits 0 only if every step held. */
#include <mcdma/mcdma.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SIZE (1u << 20)

static int fail(const char* what) {
  fprintf(stderr, "consumer-c: FAIL %s: %s\n", what, mcdma_last_error());
  return 1;
}

static void reverse(void* user, mcdma_call* call) {
  (void)user;
  size_t n = 0;
  const unsigned char* p = (const unsigned char*)mcdma_call_payload(call, &n);
  unsigned char out[256];
  if (n > sizeof(out)) n = sizeof(out);
  for (size_t i = 0; i < n; i++) out[i] = p[n - 1 - i];
  mcdma_reply(call, out, n);
}

static unsigned char pattern(uint64_t i, unsigned seed) { return (unsigned char)(i * 31 + seed); }

int main(void) {
  if (mcdma_abi_version() != MCDMA_ABI_VERSION || mcdma_version() != MCDMA_VERSION) {
    fprintf(stderr, "consumer-c: FAIL header %u/%u, library %u/%u\n", MCDMA_VERSION,
            MCDMA_ABI_VERSION, mcdma_version(), mcdma_abi_version());
    return 1;
  }
  mcdma_client* server = NULL;
  mcdma_client* client = NULL;
  if (mcdma_connect(NULL, "consumer-c-server", &server) != MCDMA_OK) return fail("connect");
  if (mcdma_connect(NULL, "consumer-c-client", &client) != MCDMA_OK) return fail("connect");

  if (mcdma_serve(server, "consumer.reverse", reverse, NULL, NULL) != MCDMA_OK)
    return fail("serve");
  void* reply = NULL;
  size_t len = 0;
  if (mcdma_call_service(client, "consumer.reverse", "abcdef", 6, 5000, &reply, &len) != MCDMA_OK)
    return fail("call");
  int same = len == 6 && memcmp(reply, "fedcba", 6) == 0;
  mcdma_free_reply(reply);
  if (!same) return fail("reply bytes");
  if (mcdma_call_service(client, "consumer.nobody", "x", 1, 5000, &reply, &len) != MCDMA_NOT_FOUND)
    return fail("an unknown service is NOT_FOUND");

  mcdma_buffer* exported = NULL;
  mcdma_buffer* local = NULL;
  if (mcdma_alloc(server, SIZE, &exported) != MCDMA_OK) return fail("alloc");
  if (mcdma_alloc(client, SIZE, &local) != MCDMA_OK) return fail("alloc");
  unsigned char* ex = (unsigned char*)mcdma_buffer_data(exported);
  unsigned char* lo = (unsigned char*)mcdma_buffer_data(local);
  for (uint64_t i = 0; i < SIZE; i++) ex[i] = pattern(i, 1);
  if (mcdma_export(server, exported, "consumer.buf", 0, 0, 0,
                   MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE) != MCDMA_OK)
    return fail("export");
  mcdma_remote* remote = NULL;
  if (mcdma_resolve(client, NULL, "consumer.buf", &remote) != MCDMA_OK) return fail("resolve");
  uint64_t moved = 0;
  if (mcdma_read(client, remote, 0, local, 0, SIZE, 5000, &moved) != MCDMA_OK || moved != SIZE)
    return fail("read");
  for (uint64_t i = 0; i < SIZE; i++)
    if (lo[i] != pattern(i, 1)) return fail("read bytes");
  for (uint64_t i = 0; i < SIZE; i++) lo[i] = pattern(i, 2);
  if (mcdma_write(client, remote, 0, local, 0, SIZE, 5000, &moved) != MCDMA_OK || moved != SIZE)
    return fail("write");
  for (uint64_t i = 0; i < SIZE; i++)
    if (ex[i] != pattern(i, 2)) return fail("written bytes");

  mcdma_remote_free(remote);
  mcdma_buffer_free(local);
  mcdma_buffer_free(exported);
  mcdma_close(client);
  mcdma_close(server);
  printf("consumer-c: ok (libmcdma %u, ABI %u; a call and %u bytes each way)\n", mcdma_version(),
         mcdma_abi_version(), SIZE);
  return 0;
}
