"""`gc-info`: list the IPU devices of the job's V-IPU partition and show one device's attributes.

Devices are numbered within a partition as Poplar sees them: the single IPUs
0..n-1 first, then the multi-IPU devices (groups of 2, 4, 8, ... consecutive
IPUs) with the following ids. The partition is the job's
(IPUOF_VIPU_API_PARTITION_ID, set by Slurm for jobs run with --ipus); the
partitions come from the V-IPU server (IPUOF_VIPU_API_HOST, default "vipu").

Outside a job (no IPUOF_VIPU_API_PARTITION_ID) `gc-info -l` and
`gc-info --device-id N --device-info` show the host's view: the whole POD, every
IPU of it as one listing named after it (`p64`, as ALCF's Slurm partition is),
not marked [active]. This is the guide's reading: its listing is run as a plain
command on an IPU host, "the devices are numbered 0-63", and its fields are
aligned as only a 64-IPU listing aligns them (`Id:  [0]` next to `[63]`,
`IPU-M host:  [10.1.5.1]` next to `[10.1.5.16]`); a job's partition of 1 to 16
IPUs lists `Id: [0]`, as Graphcore's own examples of small partitions do. The
view reads the POD's layout (GET /pod, which names no user), so it shows no one's
jobs; a user's own partitions are `-l --all-partitions`. Nothing outside a job
can run on these devices: PopTorch still needs the job's partition.

This module also holds the POD's fixed hardware facts that gc-monitor and
poprun share: which IPU-M and IPU# a POD IPU is, and its sensor readings.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from aitestbed.graphcore.vipu.client import VipuClient, VipuError

IPUS_PER_IPUM = 4
IPUMS_PER_POD = 16
IPUM_NETWORK = "10.1.5"  # printed only: the emulation never contacts an IPU-M
CLOCK = "1850MHz"  # Bow IPU
ARCHITECTURE = "ipu2"


# --- the POD's hardware, fixed per POD IPU id ------------------------------------------------

def ipum_of(pod_ipu: int) -> tuple[str, int]:
    """The IPU-M (its address) holding a POD IPU, and the IPU's index (IPU#) in it.

    The IPU-Ms count IPUs down, as the real listing shows: the first POD IPU is IPU# 3.
    """
    ipum = (pod_ipu // IPUS_PER_IPUM) % IPUMS_PER_POD + 1
    return f"{IPUM_NETWORK}.{ipum}", IPUS_PER_IPUM - 1 - pod_ipu % IPUS_PER_IPUM


def board_serial(pod_ipu: int) -> str:
    """The serial number of the board (two IPUs) holding a POD IPU."""
    ipum = (pod_ipu // IPUS_PER_IPUM) % IPUMS_PER_POD + 1
    board = 2 if ipum_of(pod_ipu)[1] >= 2 else 1  # IPU# 3 and 2 share a board, 1 and 0 the other
    return f"{ipum:04d}.{board:04d}.{8203300 + 47 * ipum:07d}"


def sensors(pod_ipu: int) -> tuple[float, float, float]:
    """Deterministic, plausible readings: IPU temperature, board temperature, board power."""
    board = pod_ipu // 2
    ipu_temp = 20.0 + ((pod_ipu * 7 + 30) % 100) / 10
    board_temp = 19.0 + ((board * 13 + 37) % 60) / 10
    board_power = 85.0 + ((board * 29 + 141) % 150) / 10
    return ipu_temp, board_temp, board_power


# --- devices of a partition ----------------------------------------------------------------------

@dataclass(frozen=True)
class Device:
    """One Poplar device of a partition: a single IPU or a group of consecutive IPUs."""

    id: int
    ipus: tuple[int, ...]  # POD IPU ids
    members: tuple[int, ...]  # ids of the single-IPU devices it is made of

    @property
    def multi(self) -> bool:
        return len(self.ipus) > 1

    @property
    def target(self) -> str:
        return "Multi IPU" if self.multi else "Fabric"


def partition_devices(ipus: Sequence[int]) -> list[Device]:
    """The devices of a partition holding these POD IPUs, numbered as gc-info lists them."""
    ipus = sorted(ipus)
    devices = [Device(i, (ipu,), (i,)) for i, ipu in enumerate(ipus)]
    size = 2
    while size <= len(ipus):
        for start in range(0, len(ipus) - size + 1, size):
            members = tuple(range(start, start + size))
            devices.append(Device(len(devices), tuple(ipus[i] for i in members), members))
        size *= 2
    return devices


def devices_of_size(devices: Sequence[Device], size: int) -> list[Device]:
    return [d for d in devices if len(d.ipus) == size]


def pod_view(pod: dict) -> dict:
    """The host's view outside a job: the POD's IPUs (GET /pod) as one listing, `p<size>`."""
    hosts = {str(host): sorted(ids) for host, ids in pod.get("hosts", {}).items()}
    ipus = sorted(i for ids in hosts.values() for i in ids)
    return {"name": f"p{len(ipus)}", "ipus": ipus, "hosts": hosts}


def host_of(partition: dict, pod_ipu: int) -> str:
    for host, ids in partition.get("hosts", {}).items():
        if pod_ipu in ids:
            return host
    return "unknown"


# --- output --------------------------------------------------------------------------------------

def _bracket(value: object, width: int) -> str:
    return f"[{value}]".rjust(width)


def render_listing(partitions: Sequence[dict], active: str | None) -> list[str]:
    """`gc-info -l` for these partitions; `active` is the job's partition."""
    lines = ["Graphcore device listing:"]
    listed = [(p, partition_devices(p["ipus"])) for p in partitions]
    singles = [d for _, devices in listed for d in devices if not d.multi]
    # Fields are right-aligned to the widest single-IPU entry of the listing.
    id_width = max((len(f"[{d.id}]") for d in singles), default=3)
    host_width = max((len(f"[{ipum_of(d.ipus[0])[0]}]") for d in singles), default=3)
    for partition, devices in listed:
        state = " [active]" if partition["name"] == active else ""
        lines.append(f"Partition: {partition['name']}{state}")
        for device in devices:
            if not device.multi:
                host, index = ipum_of(device.ipus[0])
                lines.append(f"-+- Id: {_bracket(device.id, id_width)}, target: [Fabric], "
                             f"IPU-M host: {_bracket(host, host_width)}, IPU#: [{index}]")
                continue
            lines.append(f"-+- Id: {_bracket(device.id, id_width)}, target: [Multi IPU]")
            dnc_width = len(f"[{len(device.members) - 1}]")
            for dnc, (member, ipu) in enumerate(zip(device.members, device.ipus, strict=True)):
                host, index = ipum_of(ipu)
                lines.append(f" |--- Id: {_bracket(member, id_width)}, "
                             f"DNC Id: {_bracket(dnc, dnc_width)}, "
                             f"IPU-M host: {_bracket(host, host_width)}, IPU#: [{index}]")
    return lines


class UnknownDeviceError(LookupError):
    pass


def find_device(partition: dict, device_id: int) -> Device:
    devices = partition_devices(partition["ipus"])
    if 0 <= device_id < len(devices):
        return devices[device_id]
    known = f"0-{len(devices) - 1}" if len(devices) > 1 else "0"
    raise UnknownDeviceError(f"gc-info: unknown device id {device_id}: partition "
                             f"{partition['name']} has devices {known} (see gc-info -l)")


def render_device_info(partition: dict, device_id: int) -> list[str]:
    """`gc-info --device-id N --device-info`: `key: value` attribute lines."""
    device = find_device(partition, device_id)
    attributes: list[tuple[str, object]] = [("id", device.id), ("target", device.target)]
    if device.multi:
        attributes += [
            ("clock", CLOCK),
            ("ipu architecture", ARCHITECTURE),
            ("ipuof partition id", partition["name"]),
            ("number of ipus", len(device.ipus)),
            ("number of replicas", 1),
            ("reconfigurable partition", "true"),
        ]
    else:
        ipu = device.ipus[0]
        host, index = ipum_of(ipu)
        ipu_temp, board_temp, power = sensors(ipu)
        attributes += [
            ("average board temp", f"{board_temp:.1f} C"),
            ("average die temp", f"{ipu_temp:.1f} C"),
            ("board ipu index", index),
            ("board serial number", board_serial(ipu)),
            ("clock", CLOCK),
            ("ipu architecture", ARCHITECTURE),
            ("ipu error state", "no errors"),
            ("ipu utilisation", "0.00%"),
            ("ipu utilisation (session)", "0.00%"),
            ("ipuof host", host),
            ("ipuof partition id", partition["name"]),
            ("ipuof routing id", device.id),
            ("ipuof routing type", "DNC"),
            ("link speed", "16 GT/s"),
            ("link width", 8),
            ("number of replicas", 1),
            ("reconfigurable partition", "true"),
            ("remote buffers supported", 1),
            ("total board power", f"{power:.1f} W"),
        ]
    return ["Device Info:"] + [f"{key}: {value}" for key, value in attributes]


# --- the command -------------------------------------------------------------------------------

def vipu_client() -> VipuClient:
    """The V-IPU server of IPUOF_VIPU_API_HOST / IPUOF_VIPU_API_PORT (VipuError if unusable)."""
    try:
        return VipuClient()
    except ValueError:
        raise VipuError("IPUOF_VIPU_API_PORT must be a port number, not "
                        f"'{os.environ.get('IPUOF_VIPU_API_PORT')}'") from None


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gc-info", description="Display information about the IPU devices of the partition.")
    parser.add_argument("-l", "--list-devices", action="store_true",
                        help="list the devices of the active partition (outside a job: the POD's)")
    parser.add_argument("--all-partitions", action="store_true",
                        help="with -l: list the devices of every partition")
    parser.add_argument("-d", "--device-id", type=int, metavar="N",
                        help="the device the command applies to (an id from gc-info -l)")
    parser.add_argument("-i", "--device-info", action="store_true",
                        help="display the attributes of the device given with -d")
    args = parser.parse_args(argv)
    if not args.list_devices and not args.device_info:
        parser.error("no command given: use -l/--list-devices or -d N --device-info")
    if args.device_info and args.device_id is None:
        parser.error("--device-info needs a device: -d N (see gc-info -l for the ids)")

    active = os.environ.get("IPUOF_VIPU_API_PARTITION_ID") or None
    try:
        client = vipu_client()
        if args.device_info:
            partition = _partition(client, active) if active else pod_view(client.pod())
            return _print(render_device_info(partition, args.device_id))
        if args.all_partitions:
            partitions = sorted(client.partitions(), key=lambda p: (p["name"] != active, p["name"]))
        elif active is not None:
            partitions = [_partition(client, active)]
        else:  # the host's view (see the module's docstring)
            partitions = [pod_view(client.pod())]
    except VipuError as err:
        return _fail(f"gc-info: {err}")
    except UnknownDeviceError as err:
        return _fail(str(err))
    return _print(render_listing(partitions, active))


def _print(lines: Sequence[str]) -> int:
    """Print; a reader that has gone (`gc-info -l | head`) ends the command as SIGPIPE does."""
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 128 + 13
    return 0


def _partition(client: VipuClient, name: str) -> dict:
    try:
        return client.partition(name)
    except VipuError as err:
        if err.status == 404:
            raise VipuError(f"partition {name} (IPUOF_VIPU_API_PARTITION_ID) does not exist on "
                            f"the V-IPU server {client.host}:{client.port}", 404) from None
        raise


if __name__ == "__main__":
    sys.exit(main())
