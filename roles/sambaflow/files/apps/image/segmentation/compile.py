#!/usr/bin/env python3
# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""UNet2d on SN30: compile the PEF (python compile.py compile --in-width=256 --batch-size=256 ...).

The model, the data and the loop are in ../unet_lib (shared by the SN30 and SN10 apps).
"""

import os
import sys
from pathlib import Path

# The host CPUs are shared (other instances, other jobs): OpenMP threads must not spin.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is loaded

# unet_lib sits beside this app's directory (also in a user's copy of the apps).
for _apps in (Path(__file__).resolve().parent.parent, Path("/opt/sambaflow/apps/image")):
    if (_apps / "unet_lib").is_dir():
        if str(_apps) not in sys.path:
            sys.path.insert(1, str(_apps))
        break

from unet_lib.app import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1:], prog="compile.py", app_file=__file__)
