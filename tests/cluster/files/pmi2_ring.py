"""A real PMI2 client (Slurm's libpmi2 through ctypes): every rank publishes its
host name in the job's key-value space, fences, and reads every other rank's."""

import ctypes
import socket

pmi = ctypes.CDLL("libpmi2.so.0")
spawned, size, rank, appnum = (ctypes.c_int() for _ in range(4))
assert pmi.PMI2_Init(ctypes.byref(spawned), ctypes.byref(size), ctypes.byref(rank),
                     ctypes.byref(appnum)) == 0
jobid = ctypes.create_string_buffer(256)
pmi.PMI2_Job_GetId(jobid, 256)
pmi.PMI2_KVS_Put(f"host-{rank.value}".encode(), socket.gethostname().encode())
assert pmi.PMI2_KVS_Fence() == 0
hosts = []
for other in range(size.value):
    value, length = ctypes.create_string_buffer(256), ctypes.c_int()
    assert pmi.PMI2_KVS_Get(jobid.value, -1, f"host-{other}".encode(), value, 256,
                            ctypes.byref(length)) == 0
    hosts.append(value.value.decode())
print(f"rank {rank.value} of {size.value} on {socket.gethostname()} sees {','.join(hosts)}")
pmi.PMI2_Finalize()
