"""SambaNova figures (printed, gating nothing): `make bench`.

On a mini cluster of its own, as a user on sn30-r1-h1 (SambaFlow set up at login):
  - `from sambaflow import samba` wall time, which imports torch (target for
    `import sambaflow` <= 2 s; that alone imports nothing heavy);
  - the guide's LeNet, `srun python lenet.py compile ...` then `run` (one epoch,
    60,000 steps at batch 1) at the default time scale: wall time of the two
    (target <= 90 s) and the test accuracy;
  - the guide's 8-instance UNet2d data-parallel run (`Unet2d.sh pcompile` and
    `prun 256 256 8`): wall time until the batch job ends (target <= 5 min) and
    each instance's printed e2e samples_per_sec (guide: 564 to 808).
"""

from __future__ import annotations

import re
import time
import uuid

from aitestbed.host.driver import Driver
from aitestbed.node import guide
from aitestbed.sambanova import guide as sn_guide
from benchlib import cli, step

IMPORT = """TIMEFORMAT=%R
for i in 1 2 3 4 5; do { time python -c 'from sambaflow import samba'; } 2>&1; done
"""
LENET = guide.script(
    "set -e", sn_guide.LENET_VENV, "rm -rf ~/apps", sn_guide.SN_STARTERS, f"cd {sn_guide.LENET}",
    "start=$(date +%s.%N)", sn_guide.LENET_COMPILE, f"{sn_guide.LENET_RUN} | tail -n 3",
    'echo "WALL $(python3 -c "import time; print(time.time() - $start)")"')
UNET = """set -e
mkdir -p ~/apps/image/unet && cd ~/apps/image/unet
cp /data/ANL/scripts/Unet2d.sh /data/ANL/scripts/unet_batch.sh .
./Unet2d.sh pcompile 256 256 8 bench_pcompile >/dev/null
./Unet2d.sh prun 256 256 8 bench_prun
"""
RESULT = "cat /data/ANL/results/sn30-r1-h1/$USER/bench_prun/Unet2d.out; squeue -h -u $USER | wc -l"


def on_sn30(name: str, script: str) -> str:
    """script in a login shell on sn30-r1-h1, reached from sambanova as in the guide."""
    result = step(Driver(name).hop("sambanova", "sn30-r1-h1", script), script)
    return result.stdout + result.stderr


def main() -> None:
    name = f"bench-sn-{uuid.uuid4().hex[:6]}"
    cli(name, "up", "--profile", "mini", "--systems", "sambanova")
    cli(name, "login")  # the passcode once per login node
    try:
        imports = sorted(float(x) for x in on_sn30(name, IMPORT).split())
        lenet = on_sn30(name, LENET)
        started = time.monotonic()
        on_sn30(name, UNET)
        while True:
            log = on_sn30(name, RESULT)
            if log.splitlines()[-1].strip() == "0":
                break
            time.sleep(2)
        unet_wall = time.monotonic() - started
    finally:
        cli(name, "destroy")
    wall = re.search(r"WALL ([\d.]+)", lenet)
    accuracy = re.search(r"Test Accuracy: ([\d.]+)", lenet)
    rates = [float(r) for r in re.findall(r"e2e samples_per_sec: ([\d.]+)", log)]
    print(f"from sambaflow import samba (torch included): median "
          f"{imports[len(imports) // 2]:.2f} s, max {imports[-1]:.2f} s  (target <= 2 s)")
    print(f"LeNet compile + run (1 epoch, 60,000 steps): wall {float(wall.group(1)):.0f} s "
          f"(target <= 90 s), test accuracy {accuracy.group(1) if accuracy else '?'} %")
    print(f"UNet2d 8 data-parallel instances (pcompile + prun + the batch job): wall "
          f"{unet_wall:.0f} s (target <= 300 s)")
    print(f"  e2e samples_per_sec per instance: {', '.join(f'{r:.1f}' for r in rates)} "
          "(guide: 564 to 808)")


if __name__ == "__main__":
    main()
