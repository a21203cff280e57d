"""Where the checkout is: the project root holding inventory/, roles/ and playbooks/
(AITESTBED_HOME, else this package's own checkout). A leaf every host module may import."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout holding inventory/, roles/ and playbooks/."""
    env = os.environ.get("AITESTBED_HOME")
    return Path(env) if env else Path(__file__).resolve().parents[3]
