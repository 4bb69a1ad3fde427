"""A KV hand-off producer as its own process, for tests that kill it.

    kv_producer.py SOCKET HANDOFF_ID LAYERS LAYER_BYTES PUBLISH

Exports LAYERS layers of LAYER_BYTES (pattern bytes), publishes the first
PUBLISH of them, prints "READY" and waits to be killed.
"""

import sys
import time

import numpy as np

import mcdma
from mcdma import kv


def main() -> None:
    socket, handoff_id = sys.argv[1], sys.argv[2]
    layers, nbytes, publish = (int(a) for a in sys.argv[3:6])
    client = mcdma.Client(socket=socket, app_name="kv-producer")
    bufs = kv.allocate_layers(client, nbytes, layers)
    for i, b in enumerate(bufs):
        np.frombuffer(b, dtype=np.uint8)[:] = (np.arange(nbytes) + i) % 251
    exp = kv.KVExport(client, handoff_id, bufs, {"dtype": "uint8"}, allowed_peers=["host-b"])
    for i in range(publish):
        exp.publish_layer(i)
    print("READY", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
